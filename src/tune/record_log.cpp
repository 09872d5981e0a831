// JSON Lines record log: header, records flushed one per line, read back for --resume.
#include "tune/record_log.hpp"

#include <chrono>
#include <ctime>
#include <fstream>
#include <iterator>
#include <sstream>

#include <fmt/format.h>

#include "model/json_text.hpp"
#include "moetune/error.hpp"
#include "moetune/roofline.hpp"
#include "moetune/stats.hpp"
#include "tune/cost_model.hpp"

namespace moetune::tune {
namespace {

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json shape_key(const MoeShape& s) {
  return {{"E", s.E},
          {"E_global", s.E_global},
          {"N", s.N},
          {"K", s.K},
          {"topk", s.topk},
          {"dtype", std::string(to_string(s.dtype))},
          {"block_shape", s.block_shape ? nlohmann::json(*s.block_shape) : nlohmann::json()}};
}

double us(double s) { return s * 1e6; }

}  // namespace

nlohmann::json make_log_header(const TuneOptions& o) {
  const Provenance& p = o.provenance;
  nlohmann::json h;
  h["type"] = "header";
  h["schema_version"] = kLogSchemaVersion;
  h["moetune_version"] = p.moetune_version;
  h["git_revision"] = p.git_revision;
  h["kernel_source_hash"] = p.kernel_source_hash;
  h["device"] = {{"name", p.device_name.empty() ? o.gpu.name : p.device_name},
                 {"sm", o.gpu.compute_capability()},
                 {"sms", o.gpu.sm_count},
                 {"smem_per_block_bytes", o.gpu.smem_per_block_bytes},
                 {"driver", p.driver_version},
                 {"cuda", p.cuda_version},
                 {"nvrtc", p.nvrtc_version}};
  h["shape"] = shape_key(o.shape);
  h["space"] = default_space().to_json();
  h["seed"] = o.seed;
  h["argv"] = p.argv;
  h["mode"] = "cold";
  h["time"] = utc_now();
  return h;
}

void check_log_header(const nlohmann::json& log, const nlohmann::json& expected,
                      const std::string& path) {
  struct Field {
    const char* name;
    nlohmann::json::json_pointer ptr;
  };
  const Field fields[] = {
      {"device", nlohmann::json::json_pointer("/device/name")},
      {"shape", nlohmann::json::json_pointer("/shape")},
      {"kernel_source_hash", nlohmann::json::json_pointer("/kernel_source_hash")},
      {"space", nlohmann::json::json_pointer("/space")}};
  if (!log.is_object() || log.value("type", "") != "header") {
    throw InputError("resume", path, "the log's first line is not a tuner header");
  }
  for (const Field& f : fields) {
    const nlohmann::json have = log.contains(f.ptr) ? log.at(f.ptr) : nlohmann::json();
    const nlohmann::json want = expected.contains(f.ptr) ? expected.at(f.ptr) : nlohmann::json();
    if (have != want) {
      throw InputError(std::string("resume.") + f.name, have.dump(),
                       fmt::format("log {} was recorded for {}={}; refusing to resume (use a new "
                                   "--out, or run without --resume to start over)",
                                   path, f.name, want.dump()));
    }
  }
}

nlohmann::json to_json(const LogRecord& r, const GpuSpec* gpu, const MoeShape* shape) {
  nlohmann::json j;
  j["type"] = r.kind;
  j["schema_version"] = kLogSchemaVersion;
  j["M"] = r.M;
  j["stage"] = std::string(to_string(r.stage));
  j["config"] = to_json(r.config);
  j["status"] = std::string(to_string(r.status));
  j["reason"] = r.reason;
  if (r.kind == "check") {
    j["rel_error"] = r.rel_error;
    return j;
  }
  if (r.kind == "stop") {
    j["after"] = r.after;
    j["time"] = utc_now();
    return j;
  }
  j["mode"] = "cold";
  j["R"] = r.times_s.size();
  j["n"] = r.times_s.size();
  j["compile_s"] = r.compile_s;
  nlohmann::json times = nlohmann::json::array();
  for (double t : r.times_s) times.push_back(us(t));
  j["times_us"] = times;
  if (!r.times_s.empty()) {
    const Summary s = summarize(r.times_s);
    j["median_us"] = us(s.median_s);
    j["ci95_lo_us"] = us(s.ci95_lo_s);
    j["ci95_hi_us"] = us(s.ci95_hi_s);
    j["p10_us"] = us(s.p10_s);
    j["p90_us"] = us(s.p90_s);
    if (gpu && shape) {
      const double floor_s = stage_floor_s(*shape, *gpu, r.M, r.stage);
      j["floor_us"] = us(floor_s);
      j["pct_floor"] = 100.0 * floor_s / s.median_s;
    }
  }
  j["time"] = utc_now();
  return j;
}

LogRecord record_from_json(const nlohmann::json& j, const std::string& where) {
  try {
    LogRecord r;
    r.kind = j.at("type").get<std::string>();
    if (r.kind != "measure" && r.kind != "check" && r.kind != "stop") {
      throw InputError("resume", where, "unknown record type \"" + r.kind + "\"");
    }
    r.M = j.at("M").get<int>();
    const std::string stage = j.at("stage").get<std::string>();
    if (stage != "up" && stage != "down") throw InputError("resume", where, "bad stage " + stage);
    r.stage = stage == "up" ? Stage::up : Stage::down;
    r.config = parse_kernel_config(j.at("config"), nullptr, where + ".config");
    r.status = parse_candidate_status(j.at("status").get<std::string>());
    r.reason = j.value("reason", "");
    if (r.kind == "check") {
      r.rel_error = j.value("rel_error", 0.0);
    } else if (r.kind == "stop") {
      r.after = j.at("after").get<long>();
      if (r.after < 0) throw InputError("resume", where, "a stop record's after is negative");
    } else {
      for (double t_us : j.value("times_us", std::vector<double>{}))
        r.times_s.push_back(t_us * 1e-6);
      r.compile_s = j.value("compile_s", 0.0);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InputError("resume", where, std::string("malformed record: ") + e.what());
  }
}

RecordLog RecordLog::from_lines(const std::vector<std::string>& lines, const std::string& where) {
  RecordLog log;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[i]);
    } catch (const nlohmann::json::exception&) {
      // A crash can leave the last line half written: it never counted. Elsewhere: corrupt.
      if (i + 1 == lines.size() && !log.header_.is_null()) break;
      throw InputError("resume", fmt::format("{}:{}", where, i + 1), "not a JSON line");
    }
    if (log.header_.is_null()) {
      if (!j.is_object() || j.value("type", "") != "header") {
        throw InputError("resume", where, "the log's first line is not a tuner header");
      }
      log.header_ = j;
      continue;
    }
    log.records_.push_back(record_from_json(j, fmt::format("{}:{}", where, i + 1)));
  }
  if (log.header_.is_null()) throw InputError("resume", where, "empty log (no header)");
  return log;
}

RecordLog RecordLog::read(const std::filesystem::path& path) {
  // Only a regular file of a sane size: a FIFO would block the run forever, /dev/zero would grow
  // it without bound, a folder would read as an empty log.
  std::istringstream in(
      model::read_input_file_text(path, "resume", kMaxRecordLogBytes, "a record log"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return from_lines(lines, path.string());
}

LogWriter::LogWriter(const std::filesystem::path& path, const nlohmann::json& header, bool append,
                     const GpuSpec* gpu, const MoeShape* shape)
    : path_(path), gpu_(gpu), shape_(shape) {
  if (!append || !std::filesystem::exists(path)) {
    write_file_atomic(path, header.dump() + "\n");
  } else {
    // A killed run may have left its last line half written. It never counted (RecordLog::read
    // skips a torn last line); cut it off, or the next record would continue it. A last line that
    // is whole JSON and only lacks its newline did count (read parsed it, --resume reuses it):
    // end its line instead, or the log would lose that record for the next --resume.
    {
      std::ifstream in(path, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      const std::size_t nl = text.rfind('\n');
      const std::size_t keep = nl == std::string::npos ? 0 : nl + 1;
      const std::string tail = text.substr(keep);
      const bool blank = tail.find_first_not_of(" \t\r") == std::string::npos;
      if (!blank && nlohmann::json::accept(tail)) {
        std::ofstream end(path, std::ios::binary | std::ios::app);
        end << '\n';
        if (!end) throw InputError("out", path.string(), "cannot append to the record log");
      } else if (keep < text.size()) {
        in.close();
        std::filesystem::resize_file(path, keep);
      }
    }
  }
  out_.open(path, std::ios::app);
  if (!out_) throw InputError("out", path.string(), "cannot append to the record log");
}

void LogWriter::write(const LogRecord& r) {
  const std::string line = to_json(r, gpu_, shape_).dump() + "\n";
  std::lock_guard<std::mutex> lock(mutex_);
  out_ << line;
  out_.flush();  // one record at a time: an interrupted sweep keeps every finished record
}

ResumeCache::ResumeCache(const RecordLog& log) {
  for (const LogRecord& r : log.records()) {
    const Key key{r.M, static_cast<int>(r.stage), r.config};
    if (r.kind == "check") {
      checks_[key] = CheckResult{r.status == CandidateStatus::ok, r.rel_error, r.reason};
      continue;
    }
    if (r.kind == "stop") {
      stopped_after_.try_emplace({r.M, static_cast<int>(r.stage)}, r.after);  // the first stop
      continue;
    }
    ++recorded_[{r.M, static_cast<int>(r.stage)}];
    CandidateResult c;
    c.config = r.config;
    c.status = r.status;
    c.reason = r.reason;
    c.times_s = r.times_s;
    c.compile_s = r.compile_s;
    measured_[key].results.push_back(std::move(c));
    ++total_;
  }
}

std::optional<CandidateResult> ResumeCache::take(int M, Stage stage, const KernelConfig& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = measured_.find(Key{M, static_cast<int>(stage), c});
  if (it == measured_.end()) return std::nullopt;
  Queue& q = it->second;
  if (q.next < q.results.size()) return q.results[q.next++];
  // A failure is sticky: a config that failed once is not measured again.
  if (!q.results.empty() && q.results.back().status != CandidateStatus::ok) {
    return q.results.back();
  }
  return std::nullopt;
}

long ResumeCache::recorded(int M, Stage stage) const {
  auto it = recorded_.find({M, static_cast<int>(stage)});
  return it == recorded_.end() ? 0 : it->second;
}

std::optional<long> ResumeCache::stopped_after(int M, Stage stage) const {
  auto it = stopped_after_.find({M, static_cast<int>(stage)});
  if (it == stopped_after_.end()) return std::nullopt;
  return it->second;
}

std::optional<CheckResult> ResumeCache::check(int M, Stage stage, const KernelConfig& c) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = checks_.find(Key{M, static_cast<int>(stage), c});
  if (it == checks_.end()) return std::nullopt;
  return it->second;
}

}  // namespace moetune::tune
