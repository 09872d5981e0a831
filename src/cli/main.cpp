// The `moetune` command. The only place where errors become exit codes (DESIGN.md):
// InputError and usage errors -> 2, GpuUnavailable -> 3, problems found -> 4 (returned by the
// command), anything else -> 1; always one line on stderr, never a stack trace.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/text.hpp"
#include "moetune/error.hpp"

namespace {

// The commands under `app` that --help shows ("a, b, c"), and whether `word` names any of them
// (hidden ones too: the worker).
struct CommandNames {
  std::string list;
  bool has = false;
};
CommandNames command_names(CLI::App& app, const std::string& word) {
  CommandNames n;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>{})) {
    n.has = n.has || (!word.empty() && sub->check_name(word));
    if (sub->get_group().empty()) continue;  // hidden
    n.list += (n.list.empty() ? "" : ", ") + sub->get_name();
  }
  return n;
}

using moetune::cli::one_line;

// The command the line names, deepest first: `moetune config lookup ...` -> lookup, config,
// moetune. Global options live on the top app and reach every command through fallthrough.
std::vector<CLI::App*> command_chain(CLI::App& app) {
  std::vector<CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty())
    chain.push_back(chain.back()->get_subcommands().front());
  std::reverse(chain.begin(), chain.end());
  return chain;
}

// "moetune config lookup".
std::string command_path(const std::vector<CLI::App*>& chain) {
  std::string path;
  for (const CLI::App* a : chain) path = a->get_name() + (path.empty() ? "" : " ") + path;
  return path;
}

// Edit distance with adjacent transpositions (optimal string alignment): --bacth is 1 from --batch.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The first word left over that reads as an option (`--tpp`, `-x`, `--tpp=4` -> `--tpp`); empty
// when none does (`shapes foo`, or a stray `-1`).
std::string unknown_option(const CLI::App& app) {
  for (const std::string& word : app.remaining(true)) {
    if (word.size() < 2 || word[0] != '-' || word == "--") continue;
    const char c = word[word[1] == '-' ? 2 : 1];
    if (c == '\0' || std::isdigit(static_cast<unsigned char>(c)) || c == '.') continue;
    return word.substr(0, word.find('='));
  }
  return {};
}

// The option of `chain` (the command's own, then those of the commands above it) nearest to
// `typed`, dashes aside: a small edit distance (0 for 1-2 letters, 1 up to 5, else 2), else a
// prefix either way (--dry -> --dry-run, --model-path -> --model); empty when none is close.
// Hidden options (no group) are never offered.
std::string closest_option(const std::vector<CLI::App*>& chain, const std::string& typed) {
  const std::string want = typed.substr(typed.find_first_not_of('-'));
  const std::size_t limit = want.size() <= 2 ? 0 : want.size() <= 5 ? 1 : 2;
  std::string best;
  std::size_t best_score = limit + 2;  // limit + 1: a prefix
  auto consider = [&](const std::string& name, const std::string& spelled) {
    std::size_t score = edit_distance(want, name);
    if (score > limit) {
      const bool prefix = (want.size() >= 3 && name.rfind(want, 0) == 0) ||
                          (name.size() >= 2 && want.rfind(name, 0) == 0);
      score = prefix ? limit + 1 : limit + 2;
    }
    if (score < best_score) best_score = score, best = spelled;
  };
  for (const CLI::App* a : chain) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->get_group().empty()) continue;
      for (const std::string& l : opt->get_lnames()) consider(l, "--" + l);
      for (const std::string& s : opt->get_snames()) consider(s, "-" + s);
    }
  }
  return best;
}

// An option given more often than it may be (CLI11's ArgumentMismatch::AtMost): the first one.
const CLI::Option* repeated_option(const std::vector<CLI::App*>& chain) {
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {  // CLI11 checks the top app first
    for (const CLI::Option* opt : (*it)->get_options()) {
      if (opt->get_multi_option_policy() != CLI::MultiOptionPolicy::Throw) continue;
      const auto most = static_cast<std::size_t>(std::max(opt->get_items_expected_max(), 1));
      if (opt->count() > most) return opt;
    }
  }
  return nullptr;
}


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

  for (CLI::App* sub : app.get_subcommands(std::function<bool(CLI::App*)>{})) {
    sub->footer(
        "Every command also takes --model, --tp, --ep, --dtype, --gpu, --experts, --topk, "
        "--intermediate, --hidden, --block-shape and --json (see moetune --help).");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A first word that names no command reads better than CLI11's "A subcommand is required";
    // the same one level down (`moetune config lookpu`, or `moetune config` alone).
    if (argc > 1 && argv[1][0] != '-') {
      const CommandNames top = command_names(app, argv[1]);
      if (!top.has) throw moetune::InputError("command", argv[1], "unknown command; commands: " + top.list);
      CLI::App& cmd = *app.get_subcommand(argv[1]);
      const bool word = argc > 2 && argv[2][0] != '-';
      const CommandNames sub = command_names(cmd, word ? argv[2] : "");
      if (!sub.list.empty() && !word)
        throw moetune::InputError("command", argv[1], "needs a command: " + sub.list);
      if (!sub.list.empty() && !sub.has)
        throw moetune::InputError("command", std::string(argv[1]) + " " + argv[2],
                                  std::string("unknown ") + argv[1] + " command; " + argv[1] +
                                      " commands: " + sub.list);
    }
    // A misspelt or repeated option: one line naming it, not CLI11's wording. An unknown option
    // comes first (CLI11 would report a --batch it hides as missing).
    const std::vector<CLI::App*> chain = command_chain(app);
    const std::string path = command_path(chain);
    if (const std::string typed = unknown_option(app); !typed.empty()) {
      const std::string near = closest_option(chain, typed);
      const std::string hint =
          near.empty() ? "(see " + path + " --help)" : "(did you mean " + near + "?)";
      return fail(moetune::kExitBadInput,
                  "unknown option " + typed + " for '" + path + "' " + hint);
    }
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
      if (const CLI::Option* opt = repeated_option(chain)) {
        const std::size_t n = opt->count();
        const std::string times = n == 2 ? "twice" : std::to_string(n) + " times";
        return fail(moetune::kExitBadInput,
                    opt->get_name() + " given " + times + " (once is allowed)");
      }
    }
    return fail(moetune::kExitBadInput, std::string(e.what()) + " (see moetune --help)");
  }
  for (const Command& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return fail(moetune::kExitBadInput, "no command given (see moetune --help)");
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  try {
    return run(argc, argv);
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
    return fail(moetune::kExitInternal, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(moetune::kExitInternal, "internal error: unknown exception");
  }
}
