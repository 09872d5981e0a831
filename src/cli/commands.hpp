// One register_<command> per cmd_<command>.cpp. Each adds its subcommand(s) to the app and
// returns the leaf commands with the action main() runs when that leaf was parsed. Actions
// return the exit code (0, or kExitProblems when the command found problems) and throw the
// library's errors, which only main() turns into exit codes.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

#include "cli/options.hpp"

namespace moetune::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

Commands register_shapes(CLI::App& app, const GlobalOptions& g);
Commands register_roofline(CLI::App& app, const GlobalOptions& g);
Commands register_config(CLI::App& app, const GlobalOptions& g);
Commands register_kernels(CLI::App& app, const GlobalOptions& g);
Commands register_check(CLI::App& app, const GlobalOptions& g);
Commands register_bench(CLI::App& app, const GlobalOptions& g);
Commands register_profile(CLI::App& app, const GlobalOptions& g);
Commands register_tune(CLI::App& app, const GlobalOptions& g);  // tune and the hidden worker

}  // namespace moetune::cli
