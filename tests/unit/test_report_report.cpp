// The report: Markdown and one self-contained HTML page, a row per M, an inline <svg>, flags.
#include <gtest/gtest.h>

#include "report/report.hpp"

namespace moetune::report {
namespace {

ReportInput sample() {
  ReportInput in;
  in.title = "moetune tune: E=256 N=256 K=3072 topk=8 fp8_w8a8 [128,128] on NVIDIA H200";
  in.device = "NVIDIA H200";
  in.strategy = "successive_halving";
  in.tables = "a.json, a_down.json";
  in.elapsed_s = 12.5;
  in.measurements = 321;
  ReportRow tuned;
  tuned.M = 1;
  tuned.flag = "tuned";
  tuned.default_us = 22.3, tuned.default_lo_us = 22.0, tuned.default_hi_us = 22.6;
  tuned.tuned_us = 17.4, tuned.tuned_lo_us = 17.2, tuned.tuned_hi_us = 17.6;
  tuned.floor_us = 4.5;
  tuned.bound = "memory";
  tuned.pct_floor = 100 * 4.5 / 17.4;
  tuned.speedup = 22.3 / 17.4;
  tuned.margin_up_pct = 4.2;
  tuned.up_config = "m16n64k128_g1_w4_s4_sk2";
  tuned.down_config = "m16n32k128_g1_w4_s3_sk1";
  ReportRow noise = tuned;
  noise.M = 64;
  noise.flag = "within noise";
  noise.tuned_us = 22.3;
  noise.notes = {"m64n128k128 failed the accuracy check <error 0.5>; next taken"};
  ReportRow unreached;
  unreached.M = 4096;
  unreached.flag = "not reached";
  unreached.floor_us = 142.6;
  unreached.bound = "memory";
  unreached.up_config = unreached.down_config = "m64n128k128_g32_w4_s3_sk1";
  in.rows = {tuned, noise, unreached};
  return in;
}

TEST(Report, MarkdownHasARowPerMWithFlags) {
  const std::string md = markdown(sample());
  EXPECT_NE(md.find("| 1 | 22.3 [22.0, 22.6] | 17.4 [17.2, 17.6] | 1.28× | 4.5 | 26% | memory | "
                    "4.2% / — | tuned |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 64 |"), std::string::npos);
  EXPECT_NE(md.find("within noise"), std::string::npos);
  EXPECT_NE(md.find("| 4096 | — | — | — | 142.6 | — | memory |"), std::string::npos);
  EXPECT_NE(md.find("not reached"), std::string::npos);
  EXPECT_NE(md.find("- M=64: m64n128k128 failed the accuracy check"), std::string::npos);
}

TEST(Report, HtmlIsSelfContainedWithAnSvgPlot) {
  const std::string h = html(sample());
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(h.find("<svg"), std::string::npos);
  EXPECT_NE(h.find("</svg>"), std::string::npos);
  // No external assets: no src=, no stylesheet links, no http(s) except the SVG namespace.
  EXPECT_EQ(h.find("src="), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  // One table row per M (plus the header row), with the flag classes.
  std::size_t rows = 0;
  for (std::size_t at = h.find("<tr class="); at != std::string::npos;
       at = h.find("<tr class=", at + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 3u);
  EXPECT_NE(h.find("class=\"unreached\"><td>4096</td>"), std::string::npos);
  // Text from notes is escaped.
  EXPECT_NE(h.find("&lt;error 0.5&gt;"), std::string::npos);
  // Measured points are plotted with CI whiskers; the unreached M has no point.
  EXPECT_NE(h.find("M=1 tuned 17.4 µs"), std::string::npos);
  EXPECT_EQ(h.find("M=4096 tuned"), std::string::npos);
}

}  // namespace
}  // namespace moetune::report
