// The measuring process: run_worker's JSON Lines protocol over a fake backend, and the parent
// side (WorkerClient / GpuEvaluator) against a scripted /bin/sh worker that answers, crashes and
// hangs: a crash or hang costs one candidate (launch_failed / timeout), never the sweep.
#include <signal.h>
#include <unistd.h>

#include <sstream>

#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::tune {
namespace {

class FakeBackend : public WorkerBackend {
 public:
  nlohmann::json hello() override { return {{"name", "Fake GPU"}, {"sm", 90}}; }
  MeasureReply measure(const MeasureRequest& r) override {
    last = r;
    MeasureReply m;
    if (r.config.BLOCK_SIZE_M == 256) throw std::runtime_error("no such kernel");
    for (int i = 0; i < r.replays; ++i) m.times_s.push_back(1e-5 * (1 + 0.01 * i));
    m.compile_s = 0.5;
    return m;
  }
  CheckResult check(const CheckRequest& r) override {
    return {r.config.SPLIT_K == 1, r.config.SPLIT_K == 1 ? 1e-3 : 0.3, ""};
  }
  std::vector<MeasureReply> compile(const MoeShape&, Stage, const std::vector<KernelConfig>& c,
                                    int M) override {
    compile_Ms.push_back(M);
    return std::vector<MeasureReply>(c.size());
  }
  MeasureRequest last;
  std::vector<int> compile_Ms;  // the M of each compile request (0: none given)
};

std::vector<nlohmann::json> serve(const std::string& input, FakeBackend* seen = nullptr) {
  FakeBackend local;
  FakeBackend& b = seen ? *seen : local;
  std::istringstream in(input);
  std::ostringstream out;
  EXPECT_EQ(run_worker(in, out, b), 0);
  std::vector<nlohmann::json> replies;
  std::istringstream lines(out.str());
  for (std::string l; std::getline(lines, l);) replies.push_back(nlohmann::json::parse(l));
  return replies;
}

MoeShape shape() {
  MoeShape s;
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 3072;
  s.topk = 8;
  s.dtype = Dtype::fp8_w8a8;
  s.block_shape = std::array<int, 2>{128, 128};
  return s;
}

TEST(Worker, AnswersEachRequestWithItsId) {
  const std::string S = shape_to_wire(shape()).dump();
  const std::string C = R"({"BLOCK_SIZE_M":16,"BLOCK_SIZE_N":64,"BLOCK_SIZE_K":128,"GROUP_SIZE_M":1,"num_warps":4,"num_stages":3})";
  const std::string input =
      R"({"id":1,"op":"hello"})" "\n"
      R"({"id":2,"op":"measure","shape":)" + S + R"(,"M":64,"stage":"down","config":)" + C +
      R"(,"replays":3})" "\n"
      R"({"id":3,"op":"check","shape":)" + S + R"(,"M":64,"stage":"up","config":)" + C + "}\n"
      "not json\n"
      R"({"id":5,"op":"explode"})" "\n"
      R"({"id":6,"op":"measure","shape":)" + S +
      R"(,"M":1,"stage":"up","config":{"BLOCK_SIZE_M":256,"BLOCK_SIZE_N":64,"BLOCK_SIZE_K":128,"GROUP_SIZE_M":1,"num_warps":4,"num_stages":3},"replays":3})" "\n"
      R"({"id":7,"op":"compile","shape":)" + S + R"(,"stage":"up","configs":[)" + C + "," + C + "]}\n"
      R"({"id":8,"op":"quit"})" "\n"
      R"({"id":9,"op":"hello"})" "\n";
  const auto r = serve(input);
  ASSERT_EQ(r.size(), 8u);  // nothing after quit
  EXPECT_EQ(r[0].at("id"), 1);
  EXPECT_EQ(r[0].at("device").at("name"), "Fake GPU");
  EXPECT_EQ(r[1].at("id"), 2);
  EXPECT_EQ(r[1].at("status"), "ok");
  EXPECT_EQ(r[1].at("times_s").size(), 3u);
  EXPECT_DOUBLE_EQ(r[1].at("compile_s").get<double>(), 0.5);
  EXPECT_EQ(r[2].at("passed"), true);
  EXPECT_EQ(r[3].at("ok"), false);  // not JSON
  EXPECT_TRUE(r[3].at("id").is_null());
  EXPECT_EQ(r[4].at("ok"), false);  // unknown op
  EXPECT_NE(r[4].at("error").get<std::string>().find("explode"), std::string::npos);
  EXPECT_EQ(r[5].at("ok"), false);  // the backend threw; the worker goes on
  EXPECT_EQ(r[5].at("id"), 6);
  EXPECT_EQ(r[6].at("results").size(), 2u);
  EXPECT_EQ(r[7].at("id"), 8);
}

// Compile-ahead carries the M it prepares for (the backend compiles only the GEMM1 epilogue that
// M runs); a request without M (an older parent) gives 0: compile every variant.
TEST(Worker, CompilePassesItsM) {
  const std::string S = shape_to_wire(shape()).dump();
  const std::string C = R"({"BLOCK_SIZE_M":16,"BLOCK_SIZE_N":64,"BLOCK_SIZE_K":128,"GROUP_SIZE_M":1,"num_warps":4,"num_stages":3})";
  FakeBackend b;
  const std::string input =
      R"({"id":1,"op":"compile","shape":)" + S + R"(,"stage":"up","M":64,"configs":[)" + C + "]}\n" +
      R"({"id":2,"op":"compile","shape":)" + S + R"(,"stage":"down","configs":[)" + C + "]}\n";
  const auto r = serve(input, &b);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(b.compile_Ms, (std::vector<int>{64, 0}));
}

TEST(Worker, ShapeRoundTripsOverTheWire) {
  const MoeShape s = shape_from_wire(shape_to_wire(shape()));
  EXPECT_EQ(s.E, 256);
  EXPECT_EQ(s.K, 3072);
  EXPECT_EQ(s.dtype, Dtype::fp8_w8a8);
  EXPECT_EQ(s.block_shape, (std::array<int, 2>{128, 128}));
  EXPECT_THROW(shape_from_wire(nlohmann::json{{"E", 1}}), InputError);
}

// A worker in sh: answers hello/compile/measure/check; BLOCK_SIZE_M 256 crashes it, 128 hangs,
// and so does a compile request without the M of the evaluation (M=1 here): a third restart.
const char* kScript = R"(
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"op":"hello"'*) printf '{"id":%s,"ok":true,"device":{"name":"Fake GPU"}}\n' "$id";;
    *'"M":1,'*'"op":"compile"'*) printf '{"id":%s,"ok":true,"results":[]}\n' "$id";;
    *'"op":"compile"'*) exit 3;;  # compile-ahead must name the M it prepares for
    *'"op":"quit"'*) printf '{"id":%s,"ok":true}\n' "$id"; exit 0;;
    *'"BLOCK_SIZE_M":256'*) exit 1;;
    *'"BLOCK_SIZE_M":128'*) exec sleep 30;;  # exec: the kill reaches the sleeper
    *'"op":"measure"'*) printf 'stray line\n{"id":%s,"ok":true,"status":"ok","times_s":[1e-05,1.2e-05]}\n' "$id";;
    *'"op":"check"'*) printf '{"id":%s,"ok":true,"passed":true,"rel_error":0.001}\n' "$id";;
  esac
done
)";

TEST(WorkerClient, CrashAndHangCostOneCandidateEach) {
  WorkerOptions w;
  w.argv = {"/bin/sh", "-c", kScript};
  w.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  w.start_timeout_s = 10;
  GpuEvaluatorOptions o;
  o.measure_timeout_s = 2.0;  // well above a loaded CI machine's sh + sed round trip
  GpuEvaluator ev(shape(), w, o);
  EXPECT_EQ(ev.device().at("name"), "Fake GPU");
  const KernelConfig ok1{16, 64, 128, 1, 4, 3, 1};
  const KernelConfig crash{256, 64, 128, 1, 8, 3, 1};
  const KernelConfig hang{128, 64, 128, 1, 4, 3, 1};
  const KernelConfig ok2{32, 64, 128, 1, 4, 3, 1};
  const auto r = ev.evaluate(1, Stage::up, {ok1, crash, hang, ok2}, 2);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].status, CandidateStatus::ok);
  EXPECT_EQ(r[0].times_s, (std::vector<double>{1e-5, 1.2e-5}));
  EXPECT_EQ(r[1].status, CandidateStatus::launch_failed);
  EXPECT_NE(r[1].reason.find("exited with 1"), std::string::npos) << r[1].reason;
  EXPECT_EQ(r[2].status, CandidateStatus::timeout);
  EXPECT_EQ(r[3].status, CandidateStatus::ok);
  EXPECT_EQ(r[3].config, ok2);
  EXPECT_EQ(ev.restarts(), 2);
  EXPECT_TRUE(ev.check(1, Stage::up, ok1).ok);
  EXPECT_EQ(ev.device_name(), "Fake GPU");
}

// Ctrl-C on a terminal reaches the whole foreground process group, workers included: they must
// ignore it (and SIGTERM), so that the parent can finish and shut them down itself.
TEST(WorkerClient, AWorkerSurvivesSigintAndSigterm) {
  WorkerOptions w;
  w.argv = {"/bin/sh", "-c", kScript};
  w.start_timeout_s = 10;
  WorkerClient c(w);
  EXPECT_EQ(c.call({{"op", "hello"}}, 10).value("ok", false), true);
  const pid_t pid = c.pid();
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  usleep(100000);  // a worker the signals killed is gone by now
  const nlohmann::json r = c.call({{"op", "check"}, {"M", 1}}, 10);
  EXPECT_EQ(r.value("passed", false), true);
  EXPECT_EQ(c.pid(), pid);
  EXPECT_EQ(c.restarts(), 0);
}

TEST(WorkerClient, AMissingProgramIsAnErrorNotAHang) {
  WorkerOptions w;
  w.argv = {"/nonexistent/moetune", "worker"};
  w.start_timeout_s = 5;
  WorkerClient c(w);
  EXPECT_THROW(c.call({{"op", "hello"}}, 1), CudaError);
}

// A worker pins the g-th GPU the user made visible: CUDA_VISIBLE_DEVICES=2,3 must not become
// GPUs 0 and 1 (another job's GPUs) in the workers.
TEST(WorkerPool, AWorkerGetsTheGthOfTheParentsVisibleDevices) {
  EXPECT_EQ(worker_visible_device(0, nullptr), "0");
  EXPECT_EQ(worker_visible_device(1, nullptr), "1");
  EXPECT_EQ(worker_visible_device(1, ""), "1");
  EXPECT_EQ(worker_visible_device(0, "2,3"), "2");
  EXPECT_EQ(worker_visible_device(1, "2, 3"), "3");
  EXPECT_EQ(worker_visible_device(1, "2,\t3 \n"), "3");
  EXPECT_EQ(worker_visible_device(0, "GPU-8a1b"), "GPU-8a1b");
  EXPECT_THROW(worker_visible_device(2, "2,3"), InputError);
  EXPECT_THROW(worker_visible_device(1, "2,,3"), InputError);
}

}  // namespace
}  // namespace moetune::tune
