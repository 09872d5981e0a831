// The tuner's record log: JSON Lines. Line 1 is a header (device, shape, kernel source hash,
// space, moetune version, seed); then one line per measured candidate (and per accuracy check),
// flushed as written, so an interrupted sweep loses nothing. `--resume` reads it back and reuses
// what is measured; a log whose header does not match this run is refused.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "moetune/tuner.hpp"
#include "tune/evaluator.hpp"

namespace moetune::tune {

inline constexpr int kLogSchemaVersion = 1;

// The most RecordLog::read takes. A sweep's log is a few MB (a line of under 1 KB per measured
// candidate); the cap, far above any real log, keeps a wrong file there from costing more.
inline constexpr std::uintmax_t kMaxRecordLogBytes = std::uintmax_t{1} << 30;

// One line after the header. kind "measure": a candidate's result with `times_s` (one entry per
// replay); kind "check": an accuracy check (status ok or wrong_result, rel_error); kind "stop":
// the budget stopped (M, stage) after `after` results (so that --resume stops there too).
struct LogRecord {
  std::string kind = "measure";
  int M = 0;
  Stage stage = Stage::up;
  KernelConfig config;
  CandidateStatus status = CandidateStatus::ok;
  std::string reason;
  std::vector<double> times_s;
  double compile_s = 0;
  double rel_error = 0;
  long after = 0;  // kind "stop": results of (M, stage) served before the stop
};

// The header of a log for these options: {"type": "header", "schema_version", "moetune_version",
// "git_revision", "kernel_source_hash", "device": {name, sm, sms, smem_per_block_bytes, driver,
// cuda, nvrtc}, "shape": {E, E_global, N, K, topk, dtype, block_shape}, "space": {...},
// "seed", "argv", "time"}.
nlohmann::json make_log_header(const TuneOptions& opts);
// The fields a resumed log must match: device.name, shape, kernel_source_hash, space.
// Throws InputError("resume.<field>", <log's value>, "log <path> was recorded for ... ").
void check_log_header(const nlohmann::json& log_header, const nlohmann::json& expected,
                      const std::string& path);

nlohmann::json to_json(const LogRecord& r, const GpuSpec* gpu = nullptr,
                       const MoeShape* shape = nullptr);
LogRecord record_from_json(const nlohmann::json& j, const std::string& where);

class RecordLog {
 public:
  // Reads a log. InputError("resume", path, ...) when it is not a regular file (a folder, a FIFO,
  // a device), holds more than kMaxRecordLogBytes, is unreadable or malformed (a truncated last
  // line, as left by a crash, is skipped).
  static RecordLog read(const std::filesystem::path& path);
  static RecordLog from_lines(const std::vector<std::string>& lines, const std::string& where);
  const nlohmann::json& header() const { return header_; }
  const std::vector<LogRecord>& records() const { return records_; }

 private:
  nlohmann::json header_;
  std::vector<LogRecord> records_;
};

// Appends records, one flushed line each; thread-safe.
class LogWriter {
 public:
  // Creates (header written atomically first) or, with append, continues an existing log.
  LogWriter(const std::filesystem::path& path, const nlohmann::json& header, bool append,
            const GpuSpec* gpu = nullptr, const MoeShape* shape = nullptr);
  void write(const LogRecord& r);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  std::mutex mutex_;
  const GpuSpec* gpu_;
  const MoeShape* shape_;
};

// Measured results of a resumed log, consumed in the order they were recorded so that a
// resumed sweep asks for, and gets, the same numbers. Thread-safe.
class ResumeCache {
 public:
  ResumeCache() = default;
  explicit ResumeCache(const RecordLog& log);
  // The next recorded result of (M, stage, config) when one exists; failures are sticky.
  std::optional<CandidateResult> take(int M, Stage stage, const KernelConfig& c);
  std::optional<CheckResult> check(int M, Stage stage, const KernelConfig& c) const;
  // Results the log holds for (M, stage), and where the budget stopped it (none: not stopped).
  long recorded(int M, Stage stage) const;
  std::optional<long> stopped_after(int M, Stage stage) const;
  std::size_t size() const { return total_; }

 private:
  using Key = std::tuple<int, int, KernelConfig>;
  std::map<std::pair<int, int>, long> recorded_;      // (M, stage) -> measure records
  std::map<std::pair<int, int>, long> stopped_after_;  // (M, stage) -> its stop record's `after`
  struct Queue {
    std::vector<CandidateResult> results;
    std::size_t next = 0;
  };
  std::map<Key, Queue> measured_;
  std::map<Key, CheckResult> checks_;
  std::size_t total_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace moetune::tune
