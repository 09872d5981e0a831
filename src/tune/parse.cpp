// Command-line helpers of `moetune tune`: --budget, --batch, --serving. InputError names the
// field and the text at fault.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "moetune/error.hpp"
#include "moetune/tuner.hpp"

namespace moetune::tune {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A plain positive decimal int (no sign, no spaces inside), or why not: the same three answers
// as the other commands' --batch (cli::parse_positive_int).
struct PositiveInt {
  int value = 0;
  const char* problem = nullptr;  // nullptr: value is good
};
PositiveInt read_positive_int(std::string_view s) {
  s = trim(s);
  long long v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.front() == '+' || end != s.data() + s.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range))
    return {0, "expected a positive integer"};
  if (ec == std::errc::result_out_of_range || v > INT_MAX) return {0, "out of range"};
  if (v < 1) return {0, "must be at least 1"};
  return {static_cast<int>(v), nullptr};
}
std::optional<int> positive_int(std::string_view s) {
  const PositiveInt p = read_positive_int(s);
  return p.problem == nullptr ? std::optional<int>(p.value) : std::nullopt;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

double parse_budget(std::string_view text) {
  const std::string value(text);
  const std::string_view s = trim(text);
  if (s.empty()) throw InputError("budget", "\"\"", "empty; expected e.g. 90s, 5m, 1h30m");
  double total_s = 0;
  std::size_t i = 0;
  char last_unit = 0;
  bool any = false;
  while (i < s.size()) {
    std::size_t j = i;
    while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
    if (j == i) {
      throw InputError("budget", value, "expected a number before each unit (e.g. 1h30m)");
    }
    double number = 0;
    const auto [end, ec] = std::from_chars(s.data() + i, s.data() + j, number);
    if (ec != std::errc() || end != s.data() + j) {
      throw InputError("budget", value, "not a number");
    }
    char unit = 's';
    if (j < s.size()) {
      unit = s[j];
      ++j;
    } else if (any) {
      throw InputError("budget", value, "a unit (h, m, s) must follow each number");
    }
    double scale = 0;
    switch (unit) {
      case 'h': scale = 3600; break;
      case 'm': scale = 60; break;
      case 's': scale = 1; break;
      default:
        throw InputError("budget", value,
                         fmt::format("unknown unit '{}'; use h, m or s (e.g. 1h30m)", unit));
    }
    // Units must descend (h, then m, then s), each once.
    const auto rank = [](char u) { return u == 'h' ? 0 : u == 'm' ? 1 : 2; };
    if (last_unit && rank(unit) <= rank(last_unit)) {
      throw InputError("budget", value, "units must come in the order h, m, s, each once");
    }
    last_unit = unit;
    total_s += number * scale;
    any = true;
    i = j;
  }
  if (!(total_s > 0) || !std::isfinite(total_s)) {
    throw InputError("budget", value, "must be a positive duration");
  }
  return total_s;
}

std::vector<int> parse_batch_list(std::string_view text) {
  const std::string value(text);
  std::vector<int> out;
  for (std::string_view part : split(text, ',')) {
    const PositiveInt v = read_positive_int(part);
    if (v.problem != nullptr)
      throw InputError("batch", value, fmt::format("\"{}\": {}", trim(part), v.problem));
    if (v.value > kMaxBatch) {
      throw InputError("batch", value,
                       fmt::format("\"{}\": above {} tokens, the cap that keeps the "
                                   "kernels' int32 token-slot ids (M * topk < 2^31) safe for "
                                   "any topk up to 128",
                                   trim(part), kMaxBatch));
    }
    out.push_back(v.value);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void check_token_slots(long long M, int topk) {
  const long long slots = M * topk;  // M <= kMaxBatch, topk <= 1024: no overflow
  if (slots > 0x7fffffffLL)
    throw InputError("batch", std::to_string(M),
                     fmt::format("M * topk = {} * {} = {} token slots: the kernels' slot ids are "
                                 "int32 (at most 2^31 - 1)",
                                 M, topk, slots));
}

std::map<int, double> parse_measured_times(std::string_view text) {
  const std::string value(text);
  std::map<int, double> out;
  for (std::string_view part : split(text, ',')) {
    const std::string_view item = trim(part);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      throw InputError("measured", value,
                       fmt::format("\"{}\" is not M=us (e.g. 8=46.7,64=111.5)", item));
    const PositiveInt m = read_positive_int(item.substr(0, eq));
    if (m.problem != nullptr || m.value > kMaxBatch)
      throw InputError("measured", value,
                       fmt::format("\"{}\": M: {}", item,
                                   m.problem != nullptr ? m.problem
                                                        : fmt::format("above {} tokens", kMaxBatch)));
    const std::string_view v = item.substr(eq + 1);
    double us = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), us);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size() || !(us > 0) ||
        !std::isfinite(us))
      throw InputError("measured", value,
                       fmt::format("\"{}\": the time must be a positive number of µs", item));
    if (!out.emplace(m.value, us).second)
      throw InputError("measured", value, fmt::format("\"{}\": each M once", item));
  }
  return out;
}

std::vector<int> serving_batch_sizes(std::string_view text) {
  const std::string value(text);
  std::optional<int> lo, hi, spec;
  for (std::string_view part : split(text, ',')) {
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      throw InputError("serving", value,
                       fmt::format("\"{}\" is not key=value (e.g. concurrency=1..64,spec=3)",
                                   trim(part)));
    }
    const std::string_view key = trim(part.substr(0, eq));
    const std::string_view v = trim(part.substr(eq + 1));
    if (key == "concurrency") {
      if (lo) throw InputError("serving.concurrency", std::string(v), "given twice");
      const std::size_t dots = v.find("..");
      if (dots == std::string_view::npos) {
        lo = hi = positive_int(v);
      } else {
        lo = positive_int(v.substr(0, dots));
        hi = positive_int(v.substr(dots + 2));
      }
      if (!lo || !hi) {
        throw InputError("serving.concurrency", std::string(v),
                         "expected a positive range lo..hi (e.g. 1..64) or one value");
      }
      if (*lo > *hi) {
        throw InputError("serving.concurrency", std::string(v), "range is empty (lo > hi)");
      }
    } else if (key == "spec") {
      if (spec) throw InputError("serving.spec", std::string(v), "given twice");
      if (v == "0") {
        spec = 0;
      } else {
        spec = positive_int(v);
        if (!spec) {
          throw InputError("serving.spec", std::string(v),
                           "expected speculative tokens per step, a non-negative integer");
        }
      }
    } else {
      throw InputError("serving", value,
                       fmt::format("unknown key \"{}\"; known: concurrency, spec", key));
    }
  }
  if (!lo) throw InputError("serving", value, "missing concurrency=lo..hi");
  const long tokens_per_step = 1L + spec.value_or(0);  // long: spec may be INT_MAX
  // The largest batch is hi's (every other concurrency is below it): named as typed.
  if (const long M = *hi * tokens_per_step; M > kMaxBatch) {  // both below 2^31: fits 64 bits
    throw InputError("serving", value,
                     fmt::format("concurrency {} x {} tokens per step = {} tokens: above {}, "
                                 "--batch's cap (the kernels' int32 token-slot ids, M * topk "
                                 "< 2^31, for any topk up to 128)",
                                 *hi, tokens_per_step, M, kMaxBatch));
  }
  std::vector<long> concurrencies{*lo};
  for (long c = 1; c < *hi; c *= 2) {
    if (c > *lo) concurrencies.push_back(c);
  }
  concurrencies.push_back(*hi);
  std::vector<int> out;
  for (long c : concurrencies) out.push_back(static_cast<int>(c * tokens_per_step));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace moetune::tune
