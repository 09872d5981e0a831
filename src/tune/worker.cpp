// The worker side of the measuring process: JSON Lines requests in, one reply line each out.
#include <unistd.h>

#include <string>

#include "moetune/error.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::tune {
namespace {

Stage stage_from(const nlohmann::json& j) {
  const std::string s = j.get<std::string>();
  if (s == "up") return Stage::up;
  if (s == "down") return Stage::down;
  throw InputError("stage", s, "expected up or down");
}

nlohmann::json reply_json(const MeasureReply& r) {
  return {{"status", std::string(to_string(r.status))},
          {"reason", r.reason},
          {"times_s", r.times_s},
          {"compile_s", r.compile_s},
          {"measure_s", r.measure_s},
          {"clock", r.clock}};
}

nlohmann::json serve(const nlohmann::json& req, WorkerBackend& backend, bool* quit) {
  const std::string op = req.at("op").get<std::string>();
  nlohmann::json out = {{"ok", true}};
  if (op == "hello") {
    out["device"] = backend.hello();
    out["pid"] = static_cast<long>(getpid());
  } else if (op == "compile") {
    std::vector<KernelConfig> configs;
    for (const auto& c : req.at("configs"))
      configs.push_back(parse_kernel_config(c, nullptr, "config"));
    const auto replies =
        backend.compile(shape_from_wire(req.at("shape")), stage_from(req.at("stage")), configs,
                        req.value("M", 0));
    nlohmann::json results = nlohmann::json::array();
    for (const MeasureReply& r : replies) {
      results.push_back({{"status", std::string(to_string(r.status))},
                         {"reason", r.reason},
                         {"compile_s", r.compile_s}});
    }
    out["results"] = results;
  } else if (op == "measure") {
    MeasureRequest m;
    m.shape = shape_from_wire(req.at("shape"));
    m.M = req.at("M").get<int>();
    m.stage = stage_from(req.at("stage"));
    m.config = parse_kernel_config(req.at("config"), nullptr, "config");
    m.replays = req.value("replays", 16);
    m.rotation = req.value("rotation", 16);
    m.seed = req.value("seed", std::uint64_t{0});
    m.hot = req.value("hot", false);
    out.update(reply_json(backend.measure(m)));
  } else if (op == "check") {
    CheckRequest c;
    c.shape = shape_from_wire(req.at("shape"));
    c.M = req.at("M").get<int>();
    c.stage = stage_from(req.at("stage"));
    c.config = parse_kernel_config(req.at("config"), nullptr, "config");
    c.seed = req.value("seed", std::uint64_t{0});
    const CheckResult r = backend.check(c);
    out["passed"] = r.ok;
    out["rel_error"] = r.rel_error;
    out["reason"] = r.reason;
  } else if (op == "quit") {
    *quit = true;
  } else {
    throw InputError("op", op, "unknown request; known: hello, compile, measure, check, quit");
  }
  return out;
}

}  // namespace

nlohmann::json shape_to_wire(const MoeShape& s) {
  return {{"E", s.E},
          {"E_global", s.E_global},
          {"N", s.N},
          {"K", s.K},
          {"topk", s.topk},
          {"dtype", std::string(to_string(s.dtype))},
          {"block_shape", s.block_shape ? nlohmann::json(*s.block_shape) : nlohmann::json()}};
}

MoeShape shape_from_wire(const nlohmann::json& j) {
  try {
    MoeShape s;
    s.E = j.at("E").get<int>();
    s.E_global = j.at("E_global").get<int>();
    s.N = j.at("N").get<int>();
    s.K = j.at("K").get<int>();
    s.topk = j.at("topk").get<int>();
    const std::string dtype = j.at("dtype").get<std::string>();
    const std::optional<Dtype> d = parse_dtype(dtype);
    if (!d) throw InputError("shape.dtype", dtype, "unknown dtype");
    s.dtype = *d;
    if (j.contains("block_shape") && !j.at("block_shape").is_null()) {
      s.block_shape = j.at("block_shape").get<std::array<int, 2>>();
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw InputError("shape", j.dump(), e.what());
  }
}

int run_worker(std::istream& in, std::ostream& out, WorkerBackend& backend) {
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json reply;
    bool quit = false;
    nlohmann::json id;
    try {
      const nlohmann::json req = nlohmann::json::parse(line);
      id = req.value("id", nlohmann::json());
      reply = serve(req, backend, &quit);
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"error", e.what()}};
    }
    reply["id"] = id;
    out << reply.dump() << '\n';
    out.flush();
    if (quit) break;
  }
  return 0;
}

}  // namespace moetune::tune
