// Markdown and self-contained HTML from the tuner's results. Formatting only: every number here
// was computed by the tuner (medians, CIs, comparisons) or the roofline.
#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace moetune::report {
namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string with_ci(const std::optional<double>& m, const std::optional<double>& lo,
                    const std::optional<double>& hi) {
  if (!m) return "—";
  return fmt::format("{:.1f} [{:.1f}, {:.1f}]", *m, lo.value_or(*m), hi.value_or(*m));
}

constexpr const char* kInterruptedText =
    "Interrupted: the run was stopped (Ctrl-C or SIGTERM) before every batch size was tuned. "
    "The rows \"not tuned (interrupted)\" keep the default; what was measured is in the log, and "
    "this command continues the run:";

std::optional<double> margin_pct(const tune::StageOutcome& s) {
  if (!s.winner_vs_runner_up) return std::nullopt;
  return (1.0 / s.winner_vs_runner_up->ratio - 1.0) * 100.0;
}

// The layer's own kernels by the name FusedMoe::layer_kernels gives them: what they are and the
// option that runs the stage path instead (moetune's defaults never run the persistent one).
std::pair<std::string, std::string> own_kernels(const std::string& kind) {
  if (kind == "decode") return {"its two decode kernels", "`--no-decode-kernels`"};
  if (kind == "sliced") return {"its sliced GEMM kernel", "`--no-sliced`"};
  return {"its " + kind + " kernels", "its option off"};
}

std::string m_list(const std::vector<int>& ms) {
  std::string t;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    t += i == 0 ? "" : i + 1 == ms.size() ? " and " : ", ";
    t += std::to_string(ms[i]);
  }
  return t;
}

}  // namespace

std::string own_kernels_text(const std::vector<ReportRow>& rows) {
  std::map<std::string, std::vector<int>> by_kind;  // each kind's Ms in the rows' order
  for (const ReportRow& r : rows) {
    if (!r.layer_kernels.empty() && r.layer_kernels != "stages")
      by_kind[r.layer_kernels].push_back(r.M);
  }
  if (by_kind.empty()) return "";
  std::string runs;
  for (const auto& [kind, ms] : by_kind) {
    const auto [what, off] = own_kernels(kind);
    runs += fmt::format("{}{} at M = {} ({} runs the stage path there)",
                        runs.empty() ? "" : "; ", what, m_list(ms), off);
  }
  return fmt::format(
      "At some batch sizes moetune's layer (its default options on this GPU, with these "
      "configs) runs kernels with tiles of their own: {}. The tables' entries at those batch "
      "sizes configure, and their times measure, only the stage path: they serve a layer run "
      "with those flags (bench and profile{}; FusedMoeOptions in the library); moetune's "
      "default layer does not run their tiles.",
      runs, by_kind.count("sliced") ? "; check takes `--no-sliced`" : "");
}

ReportInput report_input(const tune::TuneOptions& opts, const tune::TuneResult& result) {
  ReportInput in;
  in.device = opts.provenance.device_name.empty() ? opts.gpu.name : opts.provenance.device_name;
  const MoeShape& s = opts.shape;
  in.shape = fmt::format("E={} N={} K={} topk={} {}", s.E, s.N, s.K, s.topk, to_string(s.dtype));
  if (s.block_shape) in.shape += fmt::format(" [{},{}]", (*s.block_shape)[0], (*s.block_shape)[1]);
  in.title = fmt::format("moetune tune: {} on {}", in.shape, in.device);
  in.strategy = result.strategy;
  in.tables = result.up_table.filename().string() + ", " + result.down_table.filename().string();
  in.elapsed_s = result.elapsed_s;
  in.measurements = result.measurements;
  in.budget_exhausted = result.budget_exhausted;
  in.interrupted = result.interrupted;
  in.resume_command = result.resume_command;
  for (const tune::MResult& r : result.rows) {
    ReportRow row;
    row.M = r.M;
    row.flag = r.flag;
    row.floor_us = r.floor.floor_us;
    row.bound = r.floor.bound;
    if (!r.default_total_s.empty()) {
      row.default_us = r.default_total.median_s * 1e6;
      row.default_lo_us = r.default_total.ci95_lo_s * 1e6;
      row.default_hi_us = r.default_total.ci95_hi_s * 1e6;
    }
    if (!r.tuned_total_s.empty()) {
      row.tuned_us = r.tuned_total.median_s * 1e6;
      row.tuned_lo_us = r.tuned_total.ci95_lo_s * 1e6;
      row.tuned_hi_us = r.tuned_total.ci95_hi_s * 1e6;
    }
    if (row.tuned_us && *row.tuned_us > 0) row.pct_floor = 100.0 * row.floor_us / *row.tuned_us;
    if (row.tuned_us && row.default_us && *row.tuned_us > 0) {
      row.speedup = *row.default_us / *row.tuned_us;
    }
    row.margin_up_pct = margin_pct(r.up);
    row.margin_down_pct = margin_pct(r.down);
    row.up_config = config_name(r.up.chosen);
    row.down_config = config_name(r.down.chosen);
    row.layer_kernels = r.layer_kernels;
    for (const auto* st : {&r.up, &r.down}) {
      row.notes.insert(row.notes.end(), st->notes.begin(), st->notes.end());
    }
    in.rows.push_back(std::move(row));
  }
  return in;
}

std::string markdown(const ReportInput& in) {
  std::string md = fmt::format("# {}\n\n", in.title);
  md += fmt::format("Strategy: {}. Tables: {}. {} measurements in {:.1f} s{}.\n\n", in.strategy,
                    in.tables, in.measurements, in.elapsed_s,
                    in.budget_exhausted ? "; the budget ran out (see \"not reached\")" : "");
  if (in.interrupted) md += fmt::format("{}\n\n    {}\n\n", kInterruptedText, in.resume_command);
  md +=
      "Times are one layer's two grouped GEMMs (up + down), cold, median with 95% CI, in µs. "
      "A tuned config replaces the default only when the 95% CI of the time ratio excludes 1.\n\n";
  md +=
      "| M | default µs [95% CI] | tuned µs [95% CI] | speedup | floor µs | % of floor | bound "
      "| margin up / down | flag | up config | down config | layer |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ReportRow& r : in.rows) {
    md += fmt::format(
        "| {} | {} | {} | {} | {:.1f} | {} | {} | {} / {} | {} | `{}` | `{}` | {} |\n", r.M,
        with_ci(r.default_us, r.default_lo_us, r.default_hi_us),
        with_ci(r.tuned_us, r.tuned_lo_us, r.tuned_hi_us),
        r.speedup ? fmt::format("{:.2f}×", *r.speedup) : "—", r.floor_us,
        r.pct_floor ? fmt::format("{:.0f}%", *r.pct_floor) : "—", r.bound,
        r.margin_up_pct ? fmt::format("{:.1f}%", *r.margin_up_pct) : "—",
        r.margin_down_pct ? fmt::format("{:.1f}%", *r.margin_down_pct) : "—", r.flag, r.up_config,
        r.down_config, r.layer_kernels.empty() ? "—" : r.layer_kernels);
  }
  if (const std::string own = own_kernels_text(in.rows); !own.empty()) md += "\n" + own + "\n";
  bool any_notes = false;
  for (const ReportRow& r : in.rows) {
    for (const std::string& n : r.notes) {
      if (!any_notes) md += "\nNotes:\n\n";
      any_notes = true;
      md += fmt::format("- M={}: {}\n", r.M, n);
    }
  }
  return md;
}

namespace {

// Latency per M on a log2 x axis: default and tuned medians with CI whiskers, the floor as a line.
std::string svg_plot(const ReportInput& in) {
  constexpr double W = 760, H = 360, L = 70, R = 20, T = 20, B = 50;
  double y_max = 0;
  int m_min = 0, m_max = 0;
  for (const ReportRow& r : in.rows) {
    y_max = std::max({y_max, r.floor_us, r.default_hi_us.value_or(0), r.tuned_hi_us.value_or(0)});
    m_min = m_min == 0 ? r.M : std::min(m_min, r.M);
    m_max = std::max(m_max, r.M);
  }
  if (y_max <= 0) y_max = 1;
  y_max *= 1.1;
  const double lx0 = std::log2(std::max(1, m_min)), lx1 = std::log2(std::max(1, m_max));
  auto x = [&](int M) {
    if (lx1 <= lx0) return L + (W - L - R) / 2;
    return L + (std::log2(double(M)) - lx0) / (lx1 - lx0) * (W - L - R);
  };
  auto y = [&](double us) { return T + (1 - us / y_max) * (H - T - B); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"latency per batch size\">\n",
      W, H, W, H);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", L, H - B,
                   W - R, H - B);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", L, T, L,
                   H - B);
  for (int i = 0; i <= 4; ++i) {
    const double v = y_max * i / 4;
    s += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"end\">{:.0f}</text>\n", L - 6,
        y(v) + 4, v);
  }
  s += fmt::format(
      "<text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\">µs "
      "(up + down)</text>\n",
      H / 2, H / 2);
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">batch size M "
      "(tokens)</text>\n",
      (L + W - R) / 2, H - 10);
  std::string floor_pts;
  for (const ReportRow& r : in.rows) {
    s += fmt::format(
        "<text x=\"{:.1f}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>\n", x(r.M),
        H - B + 14, r.M);
    floor_pts += fmt::format("{:.1f},{:.1f} ", x(r.M), y(r.floor_us));
  }
  s += fmt::format(
      "<polyline points=\"{}\" fill=\"none\" stroke=\"#2a2\" stroke-dasharray=\"5,3\"/>\n",
      floor_pts);
  auto series = [&](const char* color, double dx, auto med, auto lo, auto hi, const char* name) {
    for (const ReportRow& r : in.rows) {
      const std::optional<double> m = med(r);
      if (!m) continue;
      const double cx = x(r.M) + dx;
      s += fmt::format(
          "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
          "stroke=\"{3}\"/>\n",
          cx, y(hi(r).value_or(*m)), y(lo(r).value_or(*m)), color);
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>M={} {} "
          "{:.1f} µs</title></circle>\n",
          cx, y(*m), color, r.M, name, *m);
    }
  };
  series(
      "#c33", -4, [](const ReportRow& r) { return r.default_us; },
      [](const ReportRow& r) { return r.default_lo_us; },
      [](const ReportRow& r) { return r.default_hi_us; }, "default");
  series(
      "#36c", 4, [](const ReportRow& r) { return r.tuned_us; },
      [](const ReportRow& r) { return r.tuned_lo_us; },
      [](const ReportRow& r) { return r.tuned_hi_us; }, "tuned");
  s += fmt::format(
      "<g font-size=\"11\"><circle cx=\"{0}\" cy=\"{1}\" r=\"4\" fill=\"#c33\"/>"
      "<text x=\"{2}\" y=\"{3}\">default</text>"
      "<circle cx=\"{4}\" cy=\"{1}\" r=\"4\" fill=\"#36c\"/>"
      "<text x=\"{5}\" y=\"{3}\">tuned</text>"
      "<line x1=\"{6}\" y1=\"{1}\" x2=\"{7}\" y2=\"{1}\" stroke=\"#2a2\" "
      "stroke-dasharray=\"5,3\"/><text x=\"{8}\" y=\"{3}\">floor (roofline)</text></g>\n",
      L + 20, T + 6, L + 28, T + 10, L + 95, L + 103, L + 160, L + 190, L + 196);
  s += "</svg>\n";
  return s;
}

}  // namespace

std::string html(const ReportInput& in) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += fmt::format("<title>{}</title>\n", escape(in.title));
  h += "<style>body{font-family:sans-serif;margin:2em;color:#222}"
       "table{border-collapse:collapse;font-size:13px}"
       "td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
       "td.l,th.l{text-align:left}code{font-size:12px}"
       ".tuned{background:#eaf3ff}.noise{background:#f7f7f7}.unreached{background:#fdeaea}"
       "</style>\n</head>\n<body>\n";
  h += fmt::format("<h1>{}</h1>\n", escape(in.title));
  h += fmt::format("<p>Strategy: {}. Tables: {}. {} measurements in {:.1f} s{}.</p>\n",
                   escape(in.strategy), escape(in.tables), in.measurements, in.elapsed_s,
                   in.budget_exhausted ? "; the budget ran out" : "");
  if (in.interrupted) {
    h += fmt::format("<p><strong>{}</strong></p>\n<pre>{}</pre>\n", escape(kInterruptedText),
                     escape(in.resume_command));
  }
  h += "<p>One layer's two grouped GEMMs (up + down), cold; median and 95% CI in µs. A tuned "
       "config replaces the default only when the 95% CI of the time ratio excludes 1.</p>\n";
  h += svg_plot(in);
  h += "<table>\n<tr><th>M</th><th>default µs [95% CI]</th><th>tuned µs [95% CI]</th>"
       "<th>speedup</th><th>floor µs</th><th>% of floor</th><th class=\"l\">bound</th>"
       "<th>margin up / down</th><th class=\"l\">flag</th><th class=\"l\">up config</th>"
       "<th class=\"l\">down config</th><th class=\"l\">layer</th></tr>\n";
  for (const ReportRow& r : in.rows) {
    const bool unreached = r.flag == "not reached" || r.flag == tune::kInterruptedFlag;
    const char* cls = r.flag == "tuned" ? "tuned" : unreached ? "unreached" : "noise";
    h += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</td><td>{}</td>"
        "<td class=\"l\">{}</td><td>{} / {}</td><td class=\"l\">{}</td><td class=\"l\"><code>{}"
        "</code></td><td class=\"l\"><code>{}</code></td><td class=\"l\">{}</td></tr>\n",
        cls, r.M, with_ci(r.default_us, r.default_lo_us, r.default_hi_us),
        with_ci(r.tuned_us, r.tuned_lo_us, r.tuned_hi_us),
        r.speedup ? fmt::format("{:.2f}×", *r.speedup) : "—", r.floor_us,
        r.pct_floor ? fmt::format("{:.0f}%", *r.pct_floor) : "—", escape(r.bound),
        r.margin_up_pct ? fmt::format("{:.1f}%", *r.margin_up_pct) : "—",
        r.margin_down_pct ? fmt::format("{:.1f}%", *r.margin_down_pct) : "—", escape(r.flag),
        escape(r.up_config), escape(r.down_config),
        escape(r.layer_kernels.empty() ? "—" : r.layer_kernels));
  }
  h += "</table>\n";
  if (const std::string own = own_kernels_text(in.rows); !own.empty()) {
    std::string text = escape(own), out;
    bool code = false;  // backquotes to <code>
    for (char ch : text) {
      if (ch == '`') {
        out += code ? "</code>" : "<code>";
        code = !code;
      } else {
        out += ch;
      }
    }
    h += "<p>" + out + "</p>\n";
  }
  bool any = false;
  for (const ReportRow& r : in.rows) {
    for (const std::string& n : r.notes) {
      if (!any) h += "<h2>Notes</h2>\n<ul>\n";
      any = true;
      h += fmt::format("<li>M={}: {}</li>\n", r.M, escape(n));
    }
  }
  if (any) h += "</ul>\n";
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace moetune::report
