// The record log: one flushed JSON line per candidate; --resume reuses measured records and
// refuses a log recorded for another device, shape, kernel or space.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "moetune/tuner.hpp"
#include "tune/cost_model.hpp"
#include "tune/evaluator.hpp"
#include "tune/record_log.hpp"
#include "fifo_test_util.hpp"
#include "model_test_util.hpp"
#include "tune_test_util.hpp"

namespace moetune::tune {
namespace {

using testing::field_of;
using moetune::testing::input_error;

std::filesystem::path temp_dir(const std::string& name) {
  return testing::fresh_temp_dir("moetune_log_" + name);
}

TuneOptions options(const std::filesystem::path& out) {
  return testing::qwen_fp8_h200_options(out, {1, 16});
}

SyntheticOptions surface(const TuneOptions& o) {
  SyntheticOptions so;
  const MoeShape shape = o.shape;
  const GpuSpec gpu = o.gpu;
  so.time_s = [shape, gpu](int M, Stage stage, const KernelConfig& c) {
    return predicted_time_s(shape, gpu, M, stage, c) * (1.0 + 0.1 * (c.num_stages % 3));
  };
  return so;
}

std::vector<std::string> lines_of(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(RecordLog, OneLinePerMeasurementAfterAHeader) {
  const auto out = temp_dir("lines");
  const TuneOptions o = options(out);
  SyntheticEvaluator ev(surface(o));
  ProgressSink quiet;
  const TuneResult r = run_tune(o, ev, quiet);
  const std::vector<std::string> lines = lines_of(r.log_path);
  const nlohmann::json h = nlohmann::json::parse(lines.at(0));
  EXPECT_EQ(h.at("type"), "header");
  EXPECT_EQ(h.at("kernel_source_hash"), "abc123");
  EXPECT_EQ(h.at("device").at("name"), "NVIDIA H200");
  EXPECT_EQ(h.at("shape").at("K"), 3072);
  EXPECT_EQ(h.at("space").at("SPLIT_K"), nlohmann::json({1, 2, 4, 8}));
  long measures = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    if (j.at("type") != "measure") continue;
    ++measures;
    if (j.at("status") == "ok") {
      EXPECT_EQ(j.at("times_us").size(), j.at("n").get<std::size_t>());
      EXPECT_GT(j.at("median_us").get<double>(), 0);
      EXPECT_LE(j.at("ci95_lo_us").get<double>(), j.at("median_us").get<double>());
      EXPECT_GT(j.at("floor_us").get<double>(), 0);
    }
  }
  EXPECT_EQ(measures, r.measurements);
  EXPECT_EQ(measures, ev.evaluations());
  std::filesystem::remove_all(out);
}

TEST(RecordLog, ResumeSkipsMeasuredRecords) {
  const auto out = temp_dir("resume");
  TuneOptions o = options(out);
  ProgressSink quiet;
  SyntheticEvaluator first(surface(o));
  const TuneResult r1 = run_tune(o, first, quiet);
  ASSERT_GT(r1.measurements, 20);

  // A complete log: nothing is measured again, and the answer is the same.
  o.resume = true;
  SyntheticEvaluator second(surface(o));
  const TuneResult r2 = run_tune(o, second, quiet);
  EXPECT_EQ(second.evaluations(), 0);
  EXPECT_EQ(r2.measurements, 0);
  EXPECT_EQ(r2.resumed, r1.measurements);
  EXPECT_EQ(r2.up, r1.up);
  EXPECT_EQ(r2.down, r1.down);

  // An interrupted log (header + 10 records + a half-written line): those 10 are reused.
  std::vector<std::string> lines = lines_of(r1.log_path);
  std::string cut;
  for (int i = 0; i <= 10; ++i) cut += lines.at(i) + "\n";
  cut += lines.at(11).substr(0, lines.at(11).size() / 2);
  write_file_atomic(r1.log_path, cut);
  SyntheticEvaluator third(surface(o));
  const TuneResult r3 = run_tune(o, third, quiet);
  EXPECT_EQ(r3.resumed, 10);
  EXPECT_EQ(third.evaluations(), r3.measurements);
  EXPECT_GT(r3.measurements, 0);
  // The torn line was cut off, not continued by the next record: the log reads back whole and a
  // further --resume measures nothing.
  EXPECT_NO_THROW(RecordLog::read(r1.log_path));
  SyntheticEvaluator fourth(surface(o));
  const TuneResult r4 = run_tune(o, fourth, quiet);
  EXPECT_EQ(fourth.evaluations(), 0);
  EXPECT_EQ(r4.up, r3.up);
  std::filesystem::remove_all(out);
}

// A last record that is whole but lost its newline (a write cut right before it) counts for
// RecordLog::read, so --resume takes it from the log instead of measuring it again. The writer
// must then keep it (end its line), not cut it as torn: else the next --resume has lost it.
TEST(RecordLog, ResumeKeepsAWholeLastRecordWithoutItsNewline) {
  const auto out = temp_dir("no_newline");
  TuneOptions o = options(out);
  ProgressSink quiet;
  SyntheticEvaluator first(surface(o));
  const TuneResult r1 = run_tune(o, first, quiet);
  const std::vector<std::string> lines = lines_of(r1.log_path);
  ASSERT_GT(lines.size(), 12u);
  std::string cut;
  for (int i = 0; i <= 10; ++i) cut += lines.at(i) + "\n";
  cut += lines.at(11);  // whole, no '\n'
  write_file_atomic(r1.log_path, cut);

  o.resume = true;
  SyntheticEvaluator second(surface(o));
  const TuneResult r2 = run_tune(o, second, quiet);
  EXPECT_EQ(r2.resumed, 11);  // the 11th record counted
  EXPECT_NO_THROW(RecordLog::read(r1.log_path));
  // Every record of this run is in the log now: a further --resume measures nothing.
  SyntheticEvaluator third(surface(o));
  const TuneResult r3 = run_tune(o, third, quiet);
  EXPECT_EQ(third.evaluations(), 0);
  EXPECT_EQ(r3.up, r2.up);
  EXPECT_EQ(r3.down, r2.down);
  std::filesystem::remove_all(out);
}

TEST(RecordLog, ResumeRefusesAForeignHeader) {
  const auto out = temp_dir("foreign");
  TuneOptions o = options(out);
  ProgressSink quiet;
  SyntheticEvaluator ev(surface(o));
  run_tune(o, ev, quiet);
  o.resume = true;
  TuneOptions other_kernel = o;
  other_kernel.provenance.kernel_source_hash = "def456";
  EXPECT_EQ(field_of([&] { run_tune(other_kernel, ev, quiet); }), "resume.kernel_source_hash");
  TuneOptions other_device = o;
  other_device.provenance.device_name = "NVIDIA H100 80GB HBM3";
  // Another device writes another file name; point it at the same log by copying.
  std::filesystem::copy_file(log_path(o), log_path(other_device));
  EXPECT_EQ(field_of([&] { run_tune(other_device, ev, quiet); }), "resume.device");
  // The H200 family shares the servers' file name (NVIDIA_H200), so an H200 NVL finds the
  // H200's log itself; its header still names the H200, and the resume is refused.
  TuneOptions nvl = o;
  nvl.provenance.device_name = "NVIDIA H200 NVL";
  ASSERT_EQ(log_path(nvl), log_path(o));
  EXPECT_EQ(field_of([&] { run_tune(nvl, ev, quiet); }), "resume.device");
  std::filesystem::remove_all(out);
}

TEST(RecordLog, CommittedForeignLogIsRefusedByShape) {
  const RecordLog log =
      RecordLog::read(std::string(MOETUNE_TEST_DATA) + "/tune/foreign_header.jsonl");
  TuneOptions o = options("/nonexistent");
  o.provenance.kernel_source_hash = "synthetic";
  const nlohmann::json expected = make_log_header(o);
  EXPECT_EQ(field_of([&] { check_log_header(log.header(), expected, "foreign_header.jsonl"); }),
            "resume.shape");
  const RecordLog same =
      RecordLog::read(std::string(MOETUNE_TEST_DATA) + "/tune/replay_m16_up.jsonl");
  EXPECT_NO_THROW(check_log_header(same.header(), expected, "replay_m16_up.jsonl"));
  EXPECT_EQ(same.records().size(), 40u);
}

// A budget stop is a record of its own: read back, the resume cache knows where (M, stage)
// stopped and how many results the log holds for it.
TEST(RecordLog, StopRecordsRoundTripIntoTheResumeCache) {
  LogRecord m;
  m.M = 64;
  m.times_s = {1e-5, 1.1e-5};
  LogRecord stop;
  stop.kind = "stop";
  stop.M = 64;
  stop.stage = Stage::down;
  stop.after = 16;
  const nlohmann::json j = to_json(stop);
  EXPECT_EQ(j.at("type"), "stop");
  EXPECT_EQ(j.at("after"), 16);
  const LogRecord back = record_from_json(j, "x");
  EXPECT_EQ(back.kind, "stop");
  EXPECT_EQ(back.after, 16);
  EXPECT_EQ(back.stage, Stage::down);
  const RecordLog log = RecordLog::from_lines(
      {R"({"type":"header"})", to_json(m).dump(), to_json(m).dump(), j.dump()}, "x");
  const ResumeCache cache(log);
  EXPECT_EQ(cache.recorded(64, Stage::up), 2);
  EXPECT_EQ(cache.recorded(64, Stage::down), 0);
  EXPECT_FALSE(cache.stopped_after(64, Stage::up).has_value());
  EXPECT_EQ(cache.stopped_after(64, Stage::down), 16);
  nlohmann::json bad = j;
  bad["after"] = -1;
  EXPECT_EQ(field_of([&] { record_from_json(bad, "x"); }), "resume");
}

// --resume reads the log back: something other than a regular file at its name is refused as
// bad input (exit 2), naming --resume and the path. A FIFO blocked the run forever in the read,
// /dev/zero grew it without bound, a folder read as "empty log (no header)".
TEST(RecordLog, ResumeRefusesALogThatIsNotARegularFile) {
  const auto out = temp_dir("not_regular");
  TuneOptions o = options(out);
  o.resume = true;
  const std::filesystem::path log = log_path(o);
  ProgressSink quiet;
  SyntheticEvaluator ev(surface(o));
  const auto refusal = [&] { return input_error([&] { run_tune(o, ev, quiet); }); };

  ASSERT_EQ(::mkfifo(log.c_str(), 0600), 0);
  const InputError fifo = ::moetune::testing::unless_blocked_on(log, refusal);
  EXPECT_EQ(fifo.field(), "resume");
  EXPECT_EQ(fifo.value(), log.string());
  EXPECT_EQ(fifo.reason(), "not a regular file (a FIFO)");
  EXPECT_TRUE(std::filesystem::is_fifo(log));  // left as it was

  std::filesystem::remove(log);
  std::filesystem::create_directory(log);
  EXPECT_EQ(refusal().reason(), "a folder, not a regular file");

  if (std::filesystem::exists("/dev/zero")) {
    std::filesystem::remove(log);
    std::filesystem::create_symlink("/dev/zero", log);
    EXPECT_EQ(refusal().reason(), "not a regular file (a character device)");
  }
  EXPECT_EQ(ev.evaluations(), 0);
  std::filesystem::remove_all(out);
}

// A regular file larger than any log (a wrong file at its name) is refused by its size, before
// a byte is read: it was read whole, and a multi-GB file cost that much memory.
TEST(RecordLog, ReadRefusesALogOverTheCap) {
  const auto out = temp_dir("over_cap");
  const std::filesystem::path log = out / "big.tune.jsonl";
  std::ofstream(log).flush();
  std::filesystem::resize_file(log, kMaxRecordLogBytes + 1);  // sparse: no disk used
  const InputError e = input_error([&] { RecordLog::read(log); });
  EXPECT_EQ(e.field(), "resume");
  EXPECT_EQ(e.value(), log.string());
  EXPECT_EQ(e.reason(), fmt::format("{} bytes, more than the 1024 MiB a record log may hold",
                                    kMaxRecordLogBytes + 1));
  std::filesystem::remove_all(out);
}

TEST(RecordLog, MalformedLinesNameTheLog) {
  EXPECT_EQ(field_of([] { RecordLog::from_lines({"{\"type\": \"measure\"}"}, "x"); }), "resume");
  EXPECT_EQ(
      field_of([] {
        RecordLog::from_lines({R"({"type":"header"})", "not json", R"({"type":"header"})"}, "x");
      }),
      "resume");
  EXPECT_EQ(field_of([] { parse_candidate_status("exploded"); }), "status");
}

}  // namespace
}  // namespace moetune::tune
