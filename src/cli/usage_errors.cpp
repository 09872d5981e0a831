// Parse errors of the moetune command as one line each (usage_errors.hpp).
#include "cli/usage_errors.hpp"
#include "model/edit_distance.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "moetune/error.hpp"

namespace moetune::cli {
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

// The first word left over that reads as an option (`--tpp`, `-x`, `--tpp=4` -> `--tpp`; a
// nameless `--=4` or `---` whole); empty when none does (`shapes foo`, or a stray `-1`).
std::string unknown_option(const CLI::App& app) {
  for (const std::string& word : app.remaining(true)) {
    if (word.size() < 2 || word[0] != '-' || word == "--") continue;
    const char c = word[word[1] == '-' ? 2 : 1];
    if (c == '\0' || std::isdigit(static_cast<unsigned char>(c)) || c == '.') continue;
    const std::string name = word.substr(0, word.find('='));
    return name.find_first_not_of('-') == std::string::npos ? word : name;
  }
  return {};
}

// The option of `chain` (the command's own, then those of the commands above it) nearest to
// `typed`, dashes aside: a small edit distance (0 for 1-2 letters, 1 up to 5, else 2), else a
// prefix either way (--dry -> --dry-run, --model-path -> --model); empty when none is close.
// Hidden options (no group) are never offered.
std::string closest_option(const std::vector<CLI::App*>& chain, const std::string& typed) {
  const std::size_t at = typed.find_first_not_of('-');
  if (at == std::string::npos || typed[at] == '=') return {};
  const std::string want = typed.substr(at);
  // A prefix of exactly one option's name wins (--top -> --topk, not --tp by one letter).
  std::vector<std::string> prefixed;
  for (const CLI::App* a : chain) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->get_group().empty()) continue;
      for (const std::string& l : opt->get_lnames())
        if (want.size() >= 3 && l.size() > want.size() && l.rfind(want, 0) == 0)
          prefixed.push_back("--" + l);
    }
  }
  if (prefixed.size() == 1) return prefixed.front();
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

}  // namespace

std::string usage_error_line(CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  // A first word that names no command reads better than CLI11's "A subcommand is required";
  // the same one level down (`moetune config lookpu`, or `moetune config` alone).
  if (argc > 1 && argv[1][0] != '-') {
    const CommandNames top = command_names(app, argv[1]);
    if (!top.has)
      throw moetune::InputError("command", argv[1], "unknown command; commands: " + top.list);
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
  // No command at all (`moetune`, `moetune --tp 4`): the choices, not CLI11's wording.
  if (app.get_subcommands().empty() && unknown_option(app).empty() &&
      dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)
    return "no command given; commands: " + command_names(app, "").list +
           " (see moetune --help)";
  // A misspelt or repeated option: one line naming it, not CLI11's wording. An unknown option
  // comes first (CLI11 would report a --batch it hides as missing).
  const std::vector<CLI::App*> chain = command_chain(app);
  const std::string path = command_path(chain);
  if (const std::string typed = unknown_option(app); !typed.empty()) {
    const std::string near = closest_option(chain, typed);
    // Spelt right but before the command it belongs to (`moetune --batch 1 config lookup`).
    if (near == typed && chain.size() > 1)
      return typed + " belongs after '" + path + "' (a command's options follow its name)";
    const std::string hint =
        near.empty() ? "(see " + path + " --help)" : "(did you mean " + near + "?)";
    return "unknown option " + typed + " for '" + path + "' " + hint;
  }
  // A stray word (`moetune shapes extra`): named as every other bad value is.
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> extras;
    for (CLI::App* a : chain)
      for (const std::string& x : a->remaining()) extras.push_back(x);
    if (!extras.empty()) {
      std::string words = extras.front();
      for (std::size_t i = 1; i < extras.size(); ++i) words += " " + extras[i];
      throw moetune::InputError("argument", words,
                                "not expected by '" + path + "' (see " + path + " --help)");
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (const CLI::Option* opt = repeated_option(chain)) {
      const std::size_t n = opt->count();
      const std::string times = n == 2 ? "twice" : std::to_string(n) + " times";
      return opt->get_name() + " given " + times + " (once is allowed)";
    }
  }
  return std::string(e.what()) + " (see moetune --help)";
}

}  // namespace moetune::cli
