// Real measurement, out of process: a GpuEvaluator talks to one `moetune worker` process per GPU
// over JSON Lines (the worker reads requests on stdin and answers one line each on stdout), so a
// candidate that faults the GPU kills only the worker; the parent restarts it and records the
// candidate as launch_failed (or timeout). The parent side (spawn, restart, timeout) lives here;
// the worker's GPU side is a WorkerBackend (implemented with src/gemm and src/bench) driven by
// run_worker().
//
// Protocol (one JSON object per line; every reply carries the request's "id" and "ok"):
//   {"id":1,"op":"hello"}
//     -> {"id":1,"ok":true,"device":{"name","sm","driver","cuda","nvrtc",...},"pid":123}
//   {"id":2,"op":"compile","shape":S,"stage":"up","M":64,"configs":[C,...]}  ("M" optional)
//     -> {"id":2,"ok":true,"results":[{"status":"ok"|"compile_failed","reason","compile_s"}]}
//        (compiles ahead on a thread pool, so that measuring one config overlaps compiling the
//        next; a backend may answer "ok" for builds still running and let "measure" wait for
//        its own config; GpuEvaluator sends each chunk of candidates here first)
//   {"id":3,"op":"measure","shape":S,"M":64,"stage":"down","config":C,"replays":16,
//    "rotation":16,"seed":0,"hot":false}
//     -> {"id":3,"ok":true,"status":"ok","reason":"","times_s":[...],"compile_s":0.8,
//         "measure_s":0.05,"clock":{"default_mhz","median_mhz","min_mhz","throttled"}}
//        times_s: `replays` per-call times (seconds), each one CUDA-graph replay of calls over
//        >= `rotation` routing sets (cold) divided by its calls. status: ok, compile_failed,
//        launch_failed, wrong_result.
//   {"id":4,"op":"check","shape":S,"M":64,"stage":"up","config":C,"seed":0}
//     -> {"id":4,"ok":true,"passed":true,"rel_error":0.004,"reason":""}
//   {"id":5,"op":"quit"} -> {"id":5,"ok":true}, then the worker exits 0.
//   A request the worker cannot serve: {"id":n,"ok":false,"error":"..."}.
// S = shape_to_wire(shape): {"E","E_global","N","K","topk","dtype","block_shape"}; C = a config
// as in the tables (to_json(KernelConfig)).
#pragma once
#include <sys/types.h>

#include <istream>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "moetune/model.hpp"
#include "tune/evaluator.hpp"

namespace moetune::tune {

nlohmann::json shape_to_wire(const MoeShape& shape);
// InputError("shape", ...) on a malformed object.
MoeShape shape_from_wire(const nlohmann::json& j);

struct MeasureRequest {
  MoeShape shape;
  int M = 0;
  Stage stage = Stage::up;
  KernelConfig config;
  int replays = 16;
  int rotation = 16;  // routing sets rotated inside the graph (cold: >= 16)
  std::uint64_t seed = 0;
  bool hot = false;
};

struct MeasureReply {
  CandidateStatus status = CandidateStatus::ok;
  std::string reason;
  std::vector<double> times_s;
  double compile_s = 0;
  double measure_s = 0;
  nlohmann::json clock = nlohmann::json::object();
};

struct CheckRequest {
  MoeShape shape;
  int M = 0;
  Stage stage = Stage::up;
  KernelConfig config;
  std::uint64_t seed = 0;
};

// The worker's GPU side. Methods may throw: run_worker answers {"ok": false, "error": what()}
// and keeps serving (a fault that kills the process is the parent's business).
class WorkerBackend {
 public:
  virtual ~WorkerBackend() = default;
  // Device facts for the log header: name, sm, sms, driver, cuda, nvrtc, kernel_source_hash.
  virtual nlohmann::json hello() = 0;
  // Compiles ahead (optional) the kernels that measuring at M will run (M = 0: unknown, every
  // kernel the stage may run): one reply per config. Default: nothing to do, all "ok".
  virtual std::vector<MeasureReply> compile(const MoeShape& shape, Stage stage,
                                            const std::vector<KernelConfig>& configs, int M) {
    (void)shape, (void)stage, (void)M;
    return std::vector<MeasureReply>(configs.size());
  }
  virtual MeasureReply measure(const MeasureRequest& r) = 0;
  virtual CheckResult check(const CheckRequest& r) = 0;
};

// Serves requests until "quit" or end of input; returns the exit code (0). A line that is not
// JSON gets {"id": null, "ok": false, "error": ...}. Flushes after every reply.
int run_worker(std::istream& in, std::ostream& out, WorkerBackend& backend);

// --- parent side --------------------------------------------------------------------------------

// The worker died (crash, GPU fault) or did not answer in time; it has been killed and will be
// restarted by the next call.
class WorkerLost : public std::runtime_error {
 public:
  WorkerLost(const std::string& what, bool timed_out)
      : std::runtime_error(what), timed_out_(timed_out) {}
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_;
};

struct WorkerOptions {
  std::vector<std::string> argv;           // e.g. {"/proc/self/exe", "worker"}
  std::map<std::string, std::string> env;  // added to the environment, e.g. CUDA_VISIBLE_DEVICES
  double start_timeout_s = 120;            // the first answer (hello) of a fresh worker
  int max_restarts = 100;                  // then the evaluator gives up (CudaError)
};

// One worker process: spawned on first use, restarted after it is lost.
class WorkerClient {
 public:
  explicit WorkerClient(WorkerOptions o);
  ~WorkerClient();  // asks it to quit, then kills it if it does not
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;
  // Sends `request` (an "id" is added) and returns the reply. Throws WorkerLost when the worker
  // dies or exceeds timeout_s; CudaError when it cannot be started or restarts run out.
  nlohmann::json call(nlohmann::json request, double timeout_s);
  const nlohmann::json& hello() const { return hello_; }
  int restarts() const { return restarts_; }
  pid_t pid() const { return pid_; }

 private:
  void start();
  void kill_worker();
  std::string read_line(double timeout_s, bool* timed_out);
  WorkerOptions o_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  long next_id_ = 1;
  int restarts_ = -1;  // the first start is not a restart
  nlohmann::json hello_;
};

struct GpuEvaluatorOptions {
  int rotation = 16;
  bool hot = false;
  std::uint64_t seed = 0;
  double measure_timeout_s = 60;   // per candidate (compile + measure)
  double compile_timeout_s = 30;   // per config in a compile-ahead batch
  double check_timeout_s = 300;
};

// An Evaluator over one worker process (one GPU).
class GpuEvaluator : public Evaluator {
 public:
  GpuEvaluator(const MoeShape& shape, WorkerOptions worker, GpuEvaluatorOptions o = {});
  std::vector<CandidateResult> evaluate(int M, Stage stage,
                                        const std::vector<KernelConfig>& configs,
                                        int replays) override;
  CheckResult check(int M, Stage stage, const KernelConfig& config) override;
  std::string device_name() const override;
  // The worker's hello (device facts), starting it if needed.
  nlohmann::json device();
  int restarts() const { return client_.restarts(); }

 private:
  MoeShape shape_;
  GpuEvaluatorOptions o_;
  WorkerClient client_;
};

// The CUDA_VISIBLE_DEVICES a worker for visible GPU `g` gets: the g-th entry of the parent's
// list when it has one (`parent_visible` = its value, nullptr when unset), else "g". A user who
// runs `CUDA_VISIBLE_DEVICES=2,3 moetune tune` gets workers on GPUs 2 and 3, not 0 and 1.
// Throws InputError (field "gpus") when the list has fewer than g+1 entries.
std::string worker_visible_device(int g, const char* parent_visible);

// One GpuEvaluator per visible GPU 0..gpus-1, each worker started as `worker_argv` with
// CUDA_VISIBLE_DEVICES naming that one GPU, for run_tune(opts, pool, progress).
EvaluatorPool make_gpu_pool(const MoeShape& shape, int gpus,
                            const std::vector<std::string>& worker_argv,
                            GpuEvaluatorOptions o = {});

}  // namespace moetune::tune
