// The one line that a CLI11 parse error of the moetune command becomes (exit 2): an unknown or
// missing command names the choices, a misspelt option the nearest option of its command, a
// repeated option how often it was given; anything else CLI11's own text.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace moetune::cli {

// `app` has been parsed (and failed with `e`) from argc/argv. Throws InputError (field
// "command") for an unknown or missing command; returns the line otherwise. Not for exit-0
// errors (--help, --version).
std::string usage_error_line(CLI::App& app, int argc, char** argv, const CLI::ParseError& e);

}  // namespace moetune::cli
