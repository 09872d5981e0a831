// The parent side of the measuring process: spawn (fork/exec over a socket pair, so a write to
// a dead worker fails instead of raising SIGPIPE), one request line out, one reply line in with
// a timeout, kill and restart when the worker dies or hangs. And GpuEvaluator on top of it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "moetune/error.hpp"
#include "tune/gpu_evaluator.hpp"

extern char** environ;

namespace moetune::tune {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

WorkerClient::WorkerClient(WorkerOptions o) : o_(std::move(o)) {}

WorkerClient::~WorkerClient() {
  if (pid_ <= 0) return;
  try {
    call({{"op", "quit"}}, 2.0);
  } catch (...) {
  }
  // Give it a moment to exit on its own, then make sure.
  for (int i = 0; i < 20; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    usleep(10000);
  }
  kill_worker();
}

void WorkerClient::kill_worker() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  buffer_.clear();
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);  // only the worker this client spawned, by its id
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  pid_ = -1;
}

void WorkerClient::start() {
  if (o_.argv.empty()) throw CudaError("worker: no command to start");
  if (++restarts_ > o_.max_restarts) {
    throw CudaError(fmt::format("worker: lost {} times; giving up", restarts_));
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    throw CudaError(std::string("worker: socketpair: ") + std::strerror(errno));
  }
  // Prepare argv/envp before fork (no allocation in the child).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (!o_.env.count(key)) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : o_.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = o_.argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    throw CudaError(std::string("worker: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: the socket becomes stdin and stdout; stderr is inherited.
    dup2(sv[1], STDIN_FILENO);
    dup2(sv[1], STDOUT_FILENO);
    // Ctrl-C reaches the terminal's whole foreground process group. A worker killed by it would
    // turn the candidate in flight into a logged launch_failed, and the parent could not finish
    // its writes; so workers ignore SIGINT and SIGTERM (SIG_IGN survives execve) and the parent,
    // which handles both, shuts them down (quit, else SIGKILL). A worker whose parent is gone
    // reads end of input and exits. Not a process group of their own: a background group that
    // writes to the terminal (the inherited stderr) is stopped by SIGTTOU under `stty tostop`.
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(sv[1]);
  pid_ = pid;
  fd_ = sv[0];
  buffer_.clear();
  // The first answer tells whether it came up.
  const long id = next_id_++;
  const std::string line = nlohmann::json({{"id", id}, {"op", "hello"}}).dump() + "\n";
  if (send(fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    kill_worker();
    throw CudaError("worker: could not send hello to " + o_.argv[0]);
  }
  bool timed_out = false;
  const std::string reply = read_line(o_.start_timeout_s, &timed_out);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(reply);
  } catch (const nlohmann::json::exception&) {
  }
  if (!j.is_object() || !j.value("ok", false)) {
    kill_worker();
    throw CudaError(fmt::format("worker: {} did not start ({})", o_.argv[0],
                                timed_out ? "no answer in time"
                                : j.is_object() ? j.value("error", "bad hello")
                                                : "exited"));
  }
  hello_ = j;
}

std::string WorkerClient::read_line(double timeout_s, bool* timed_out) {
  *timed_out = false;
  const double deadline = now_s() + timeout_s;
  for (;;) {
    const std::size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const double left = deadline - now_s();
    if (left <= 0) {
      *timed_out = true;
      return "";
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min(left, 3600.0) * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // timeout handled at the top
    char buf[65536];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return "";  // EOF: the worker is gone
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

nlohmann::json WorkerClient::call(nlohmann::json request, double timeout_s) {
  if (pid_ <= 0) start();
  const long id = next_id_++;
  request["id"] = id;
  const std::string line = request.dump() + "\n";
  if (send(fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    kill_worker();
    throw WorkerLost("worker died before the request", false);
  }
  for (;;) {
    bool timed_out = false;
    const std::string reply = read_line(timeout_s, &timed_out);
    if (timed_out || reply.empty()) {
      int status = 0;
      std::string why = timed_out ? fmt::format("no answer in {:.0f} s", timeout_s) : "worker died";
      // End of input: the worker is exiting; give it a moment to be reaped for its status.
      for (int i = 0; !timed_out && pid_ > 0 && i < 100; ++i) {
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          why = WIFSIGNALED(status) ? fmt::format("worker killed by signal {}", WTERMSIG(status))
                                    : fmt::format("worker exited with {}", WEXITSTATUS(status));
          pid_ = -1;
          break;
        }
        usleep(10000);
      }
      kill_worker();
      throw WorkerLost(why, timed_out);
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(reply);
    } catch (const nlohmann::json::exception&) {
      continue;  // not a reply line (stray output): skip it
    }
    if (j.is_object() && j.value("id", nlohmann::json()) == nlohmann::json(id)) return j;
  }
}

// --- GpuEvaluator -------------------------------------------------------------------------------

GpuEvaluator::GpuEvaluator(const MoeShape& shape, WorkerOptions worker, GpuEvaluatorOptions o)
    : shape_(shape), o_(o), client_(std::move(worker)) {}

nlohmann::json GpuEvaluator::device() {
  if (client_.hello().is_null()) client_.call({{"op", "hello"}}, 120);
  return client_.hello().value("device", nlohmann::json::object());
}

std::string GpuEvaluator::device_name() const {
  return client_.hello().is_null()
             ? ""
             : client_.hello().value(nlohmann::json::json_pointer("/device/name"), std::string());
}

std::vector<CandidateResult> GpuEvaluator::evaluate(int M, Stage stage,
                                                    const std::vector<KernelConfig>& configs,
                                                    int replays) {
  std::vector<CandidateResult> out(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) out[i].config = configs[i];
  std::vector<bool> done(configs.size(), false);
  // Compile ahead: the worker may build them all in parallel before the first is timed.
  nlohmann::json list = nlohmann::json::array();
  for (const KernelConfig& c : configs) list.push_back(to_json(c));
  try {
    const nlohmann::json r = client_.call({{"op", "compile"},
                                           {"shape", shape_to_wire(shape_)},
                                           {"stage", std::string(to_string(stage))},
                                           {"M", M},
                                           {"configs", list}},
                                          o_.compile_timeout_s * double(configs.size()) + 10);
    if (r.value("ok", false)) {
      const nlohmann::json& results = r.at("results");
      for (std::size_t i = 0; i < configs.size() && i < results.size(); ++i) {
        out[i].compile_s = results[i].value("compile_s", 0.0);
        const CandidateStatus s = parse_candidate_status(results[i].value("status", "ok"));
        if (s != CandidateStatus::ok) {
          out[i].status = s;
          out[i].reason = results[i].value("reason", "");
          done[i] = true;
        }
      }
    }
  } catch (const WorkerLost&) {
    // A compile that kills the worker: measure one by one below, which isolates the culprit.
  }
  for (std::size_t i = 0; i < configs.size(); ++i) {
    if (done[i]) continue;
    CandidateResult& r = out[i];
    try {
      const nlohmann::json j = client_.call({{"op", "measure"},
                                             {"shape", shape_to_wire(shape_)},
                                             {"M", M},
                                             {"stage", std::string(to_string(stage))},
                                             {"config", to_json(configs[i])},
                                             {"replays", replays},
                                             {"rotation", o_.rotation},
                                             {"seed", o_.seed},
                                             {"hot", o_.hot}},
                                            o_.measure_timeout_s);
      if (!j.value("ok", false)) {
        r.status = CandidateStatus::launch_failed;
        r.reason = j.value("error", "worker error");
        continue;
      }
      r.status = parse_candidate_status(j.value("status", "ok"));
      r.reason = j.value("reason", "");
      r.times_s = j.value("times_s", std::vector<double>{});
      r.compile_s += j.value("compile_s", 0.0);
      r.measure_s = j.value("measure_s", 0.0);
    } catch (const WorkerLost& e) {
      r.status = e.timed_out() ? CandidateStatus::timeout : CandidateStatus::launch_failed;
      r.reason = e.what();
    }
  }
  return out;
}

CheckResult GpuEvaluator::check(int M, Stage stage, const KernelConfig& config) {
  try {
    const nlohmann::json j = client_.call({{"op", "check"},
                                           {"shape", shape_to_wire(shape_)},
                                           {"M", M},
                                           {"stage", std::string(to_string(stage))},
                                           {"config", to_json(config)},
                                           {"seed", o_.seed}},
                                          o_.check_timeout_s);
    if (!j.value("ok", false)) return {false, 0, j.value("error", "worker error")};
    return {j.value("passed", false), j.value("rel_error", 0.0), j.value("reason", "")};
  } catch (const WorkerLost& e) {
    return {false, 0, std::string("check crashed the worker: ") + e.what()};
  }
}

std::string worker_visible_device(int g, const char* parent_visible) {
  if (parent_visible == nullptr || *parent_visible == '\0') return std::to_string(g);
  std::vector<std::string> ids;
  std::string id;
  for (const char* p = parent_visible;; ++p) {
    if (*p == ',' || *p == '\0') {
      ids.push_back(id);
      id.clear();
      if (*p == '\0') break;
    } else if (!std::isspace(static_cast<unsigned char>(*p))) {
      id += *p;
    }
  }
  if (g < 0 || g >= static_cast<int>(ids.size()) || ids[g].empty()) {
    throw InputError("gpus", std::to_string(g + 1),
                     fmt::format("CUDA_VISIBLE_DEVICES=\"{}\" names fewer GPUs", parent_visible));
  }
  return ids[g];
}

EvaluatorPool make_gpu_pool(const MoeShape& shape, int gpus,
                            const std::vector<std::string>& worker_argv, GpuEvaluatorOptions o) {
  if (gpus < 1) throw InputError("gpus", std::to_string(gpus), "must be at least 1");
  EvaluatorPool pool;
  for (int g = 0; g < gpus; ++g) {
    WorkerOptions w;
    w.argv = worker_argv;
    w.env["CUDA_VISIBLE_DEVICES"] = worker_visible_device(g, std::getenv("CUDA_VISIBLE_DEVICES"));
    pool.add(std::make_unique<GpuEvaluator>(shape, w, o));
  }
  return pool;
}

}  // namespace moetune::tune
