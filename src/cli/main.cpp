// The `moetune` command. The only place where errors become exit codes (DESIGN.md):
// InputError and usage errors -> 2, GpuUnavailable -> 3, problems found -> 4 (returned by the
// command), anything else -> 1; always one line on stderr, never a stack trace.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/text.hpp"
#include "cli/usage_errors.hpp"
#include "cuda/jit.hpp"
#include "cuda/nvrtc.hpp"
#include "moetune/error.hpp"

namespace {

using moetune::cli::one_line;

// One stderr line: whatever the message holds (a path, a key, a value) is escaped by one_line.
int fail(int code, std::string what) {
  while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
  std::fflush(stdout);
  std::fprintf(stderr, "moetune: error: %s\n", one_line(what).c_str());
  return code;
}

// `<field>=<value>: <reason>`, the value as cli::shown prints it: `""` when empty, JSON-quoted
// when it holds a newline or another character that needs escaping, else bare.
std::string input_error_text(const moetune::InputError& e) {
  return one_line(e.field()) + "=" + moetune::cli::shown(e.value()) + ": " + e.reason();
}

// An exception escaping a thread (or noexcept) must still end in one line, not an abort dump.
[[noreturn]] void on_terminate() {
  std::string what = "internal error: terminate called";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = std::string("internal error: ") + ex.what();
    } catch (...) {
    }
  }
  std::fflush(stdout);
  std::fprintf(stderr, "moetune: error: %s\n", one_line(what).c_str());
  std::_Exit(moetune::kExitInternal);
}

// CLI11's flags take the last of several (--json --json); moetune refuses a repeated flag as it
// refuses a repeated option ("--json given twice (once is allowed)", README), so that a script's
// duplicated or contradicting flags (--sliced ... --no-sliced) are caught. --help and --version
// stay CLI11's.
void refuse_repeated_flags(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_version_ptr()) continue;
    if (opt->get_expected_max() == 0 &&
        opt->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeLast) {
      opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    refuse_repeated_flags(*sub);
  }
}

int run(int argc, char** argv) {
  using namespace moetune::cli;
  CLI::App app{
      "moetune: a fused-MoE kernel library, its autotuner and a roofline analyzer.\n"
      "Tune, benchmark and check the MoE layer of a model on an NVIDIA GPU.",
      "moetune"};
  app.set_version_flag("--version", "moetune " MOETUNE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand
  GlobalOptions g;
  g.argv.assign(argv, argv + argc);
  add_global_options(app, g);

  Commands commands;
  for (auto reg : {register_shapes, register_roofline, register_config, register_kernels,
                   register_check, register_bench, register_profile, register_tune}) {
    Commands c = reg(app, g);
    commands.insert(commands.end(), c.begin(), c.end());
  }

  const std::string every =
      "Every command also takes --model, --tp, --ep, --dtype, --gpu, --experts, --topk, "
      "--intermediate, --hidden, --block-shape and --json (see moetune --help).";
  const auto all = std::function<bool(CLI::App*)>{};
  for (CLI::App* sub : app.get_subcommands(all)) {
    // kernels compiles the anchor shapes' set and refuses a model or shape (exit 2).
    sub->footer(sub->get_name() == "kernels"
                    ? "Also takes --gpu and --json (see moetune --help); not --model or the "
                      "shape options: a model's own kernels are compiled by bench, check and tune."
                    : every);
    for (CLI::App* nested : sub->get_subcommands(all)) nested->footer(every);  // config's
  }

  refuse_repeated_flags(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return fail(moetune::kExitBadInput, moetune::cli::usage_error_line(app, argc, argv, e));
  }
  // The kernels' environment knobs, refused here (InputError naming the variable, exit 2)
  // rather than by every compile of a command that builds kernels.
  for (const moetune::cuda::KernelKnob& knob : moetune::cuda::kKernelKnobs)
    (void)moetune::cuda::kernel_knob(knob);
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return fail(moetune::kExitBadInput, "no command given (see moetune --help)");
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  // Not an error (the run goes on), but a cache that never fills would cost every later run
  // its compile time unseen. Said once: the Jit calls this for its first failed write only.
  moetune::cuda::set_cache_write_failure_handler([](const std::string& dir,
                                                    const std::string& reason) {
    std::fprintf(stderr,
                 "moetune: note: cannot write the kernel cache at %s (%s); kernels will be "
                 "recompiled next time\n",
                 moetune::cli::shown(dir).c_str(), one_line(reason).c_str());
  });
  try {
    const int code = run(argc, argv);
    // What a command printed must have reached stdout (a full disk): else the run failed,
    // however it ended. (A closed pipe ends the process with SIGPIPE at the write, as for any
    // command-line tool.)
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      return fail(moetune::kExitInternal, "cannot write to standard output");
    return code;
  } catch (const moetune::InputError& e) {
    return fail(moetune::kExitBadInput, input_error_text(e));
  } catch (const moetune::GpuUnavailable& e) {
    return fail(moetune::kExitNoGpu, std::string("no usable GPU: ") + e.what());
  } catch (const moetune::CudaError& e) {
    return fail(moetune::kExitInternal, e.what());  // names the driver/NVRTC call, or the kernels
  } catch (const CLI::Error& e) {
    return fail(moetune::kExitBadInput, e.what());
  } catch (const nlohmann::json::exception& e) {
    return fail(moetune::kExitInternal, std::string("internal error (JSON): ") + e.what());
  } catch (const std::exception& e) {
    // fmt::print throws (std::system_error) when stdout fails mid-run, where the output outgrew
    // stdio's buffer: the same lost output as the fflush check above, so the same line.
    if (std::ferror(stdout)) return fail(moetune::kExitInternal, "cannot write to standard output");
    return fail(moetune::kExitInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(moetune::kExitInternal, "internal error: unknown exception");
  }
}
