// The tuning report: Markdown and one self-contained HTML page (inline SVG, no external assets),
// built only from the tuner's results (TuneResult) -- per M: default vs tuned latency with 95% CI,
// the roofline floor, % of floor, the bound, the winner's margin and the flags.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "moetune/tuner.hpp"

namespace moetune::report {

struct ReportRow {
  int M = 0;
  std::string flag;  // "tuned", "within noise", "kept default", "not reached",
                     // "not tuned (interrupted)"
  // Both GEMMs, microseconds; nullopt when not measured.
  std::optional<double> default_us, default_lo_us, default_hi_us;
  std::optional<double> tuned_us, tuned_lo_us, tuned_hi_us;
  double floor_us = 0;
  std::string bound;
  std::optional<double> pct_floor;       // floor / tuned (or default when untuned), percent
  std::optional<double> speedup;         // default / tuned median
  std::optional<double> margin_up_pct;   // winner faster than the runner-up by, percent
  std::optional<double> margin_down_pct;
  std::string up_config, down_config;    // chosen, "m64n128k128_g1_w4_s3_sk1"
  // What moetune's layer runs at M with them (MResult::layer_kernels): "stages", "decode",
  // "sliced"; "" unknown.
  std::string layer_kernels;
  std::vector<std::string> notes;
};

struct ReportInput {
  std::string title;     // "moetune tune: E=256,N=256,... on NVIDIA H200"
  std::string device;
  std::string shape;     // "E=256 N=256 K=3072 topk=8 fp8_w8a8 [128,128]"
  std::string strategy;
  std::string tables;    // the table file names
  double elapsed_s = 0;
  long measurements = 0;
  bool budget_exhausted = false;
  bool interrupted = false;    // stopped early (Ctrl-C, SIGTERM): unfinished Ms keep the default
  std::string resume_command;  // the command line that continues it (when interrupted)
  std::vector<ReportRow> rows;
};

ReportInput report_input(const tune::TuneOptions& opts, const tune::TuneResult& result);
// One paragraph (plain text, backquoted flags) naming the Ms where moetune's layer runs kernels
// with tiles of their own (layer_kernels other than "stages"), so the tables' entries there
// configure only the stage path; "" when there are none.
std::string own_kernels_text(const std::vector<ReportRow>& rows);
std::string markdown(const ReportInput& in);
std::string html(const ReportInput& in);  // one file: inline CSS and SVG

}  // namespace moetune::report
