// User-controlled text (config keys, file paths, option values) in the CLI's line-oriented
// output: every such piece is printed on one line, so that a key such as "x\nviolation: ..."
// cannot forge an output line.
#pragma once
#include <string>
#include <string_view>

namespace moetune::cli {

// `text` with every character that ends or moves a line escaped: C0 controls (\n, \r, \t, ...),
// DEL, C1 controls (U+0080..U+009F, e.g. NEL), U+2028 and U+2029, and bytes that are not UTF-8
// (\xNN). Everything else, backslashes included, is kept.
std::string one_line(std::string_view text);

// `text` as a JSON string: quoted, with `"` and `\` escaped too, and one_line's escapes.
std::string json_quoted(std::string_view text);

// A value as error lines and reports show it: bare when that is unambiguous (non-empty, nothing
// to escape, no surrounding blanks, not starting with `"`), else json_quoted(). A value that is
// already quoted ("..." as the library writes config keys and JSON excerpts) stays as it is, with
// one_line's escapes.
std::string shown(std::string_view text);

}  // namespace moetune::cli
