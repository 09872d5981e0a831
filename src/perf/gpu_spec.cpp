// The GPU spec table. Every number cites where it comes from. Conventions:
// - Tensor-core peaks are dense: datasheets print "X | 2X" or "2X*" with sparsity; we take X.
// - GeForce parts run fp16/bf16/fp8 MMA with fp32 accumulate at half the fp16-accumulate rate;
//   the kernels accumulate in fp32, so their peak is the fp32-accumulate one.
// - smem_per_block_bytes is the opt-in maximum (cudaDevAttrMaxSharedMemoryPerBlockOptin), from
//   the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability" table:
//   227 KB on cc 9.0/10.0, 163 KB on cc 8.0, 99 KB on cc 8.9/12.0.
// - l2_bytes is what cudaDeviceProp::l2CacheSize reports (datasheet "MB" are MiB here).
#include "moetune/gpu_spec.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "moetune/error.hpp"

namespace moetune {
namespace {

constexpr double kGBps = 1e9;    // datasheets give bandwidth in GB/s (10^9 bytes)
constexpr double kTflops = 1e12;
constexpr int kMiB = 1024 * 1024;
constexpr int kSmemSm90 = 232448;   // 227 KB: cc 9.0 and 10.0
constexpr int kSmemSm80 = 166912;   // 163 KB: cc 8.0
constexpr int kSmemSm89 = 101376;   // 99 KB: cc 8.9 and 12.0

std::vector<GpuSpec> build_table() {
  std::vector<GpuSpec> t;

  GpuSpec h200;
  h200.name = "NVIDIA H200";
  h200.aliases = {"H200", "H200-SXM", "H200 SXM 141GB"};
  h200.mem_bandwidth_Bps = 4800 * kGBps;  // H200 datasheet: 4.8 TB/s HBM3e (DESIGN.md)
  h200.bf16_flops = 989.4 * kTflops;      // H200 datasheet: BF16 1,979 TFLOPS with sparsity
  h200.fp16_flops = 989.4 * kTflops;      // H200 datasheet: FP16 1,979 TFLOPS with sparsity
  h200.fp8_flops = 1978.9 * kTflops;      // H200 datasheet: FP8 3,958 TFLOPS with sparsity
  h200.sm_count = 132;                    // same GH100 configuration as H100 SXM5
  h200.smem_per_block_bytes = kSmemSm90;
  h200.l2_bytes = 50 * kMiB;              // Hopper whitepaper: 50 MB L2 (H100 SXM5)
  h200.cc_major = 9, h200.cc_minor = 0;
  h200.source = "NVIDIA H200 Tensor Core GPU datasheet; NVIDIA H100 (Hopper) whitepaper; "
                "CUDA C++ Programming Guide (compute capabilities)";
  t.push_back(h200);

  GpuSpec h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.aliases = {"H100", "H100-SXM", "H100 SXM5", "H100 SXM5 80GB"};
  h100.mem_bandwidth_Bps = 3350 * kGBps;  // H100 datasheet, SXM: 3.35 TB/s HBM3
  h100.bf16_flops = 989.4 * kTflops;      // H100 datasheet, SXM: BF16 1,979 TFLOPS sparse
  h100.fp16_flops = 989.4 * kTflops;      // H100 datasheet, SXM: FP16 1,979 TFLOPS sparse
  h100.fp8_flops = 1978.9 * kTflops;      // H100 datasheet, SXM: FP8 3,958 TFLOPS sparse
  h100.sm_count = 132;                    // Hopper whitepaper: H100 SXM5 has 132 SMs
  h100.smem_per_block_bytes = kSmemSm90;
  h100.l2_bytes = 50 * kMiB;              // Hopper whitepaper: 50 MB L2
  h100.cc_major = 9, h100.cc_minor = 0;
  h100.source = "NVIDIA H100 Tensor Core GPU datasheet (SXM); NVIDIA H100 (Hopper) whitepaper; "
                "CUDA C++ Programming Guide (compute capabilities)";
  t.push_back(h100);

  // Other Hopper boards, so that a local one gets datasheet peaks rather than none.
  GpuSpec h800 = h100;  // export variant of the H100 SXM: same memory and tensor cores
  h800.name = "NVIDIA H800";
  h800.aliases = {"H800"};
  h800.source = "NVIDIA H800 product brief (H100 SXM compute and memory); CUDA C++ Programming "
                "Guide (compute capabilities)";
  t.push_back(h800);

  GpuSpec h100_nvl = h100;
  h100_nvl.name = "NVIDIA H100 NVL";
  h100_nvl.aliases = {"H100-NVL"};
  h100_nvl.mem_bandwidth_Bps = 3900 * kGBps;  // H100 datasheet, NVL: 3.9 TB/s HBM3
  h100_nvl.bf16_flops = 835.5 * kTflops;      // H100 datasheet, NVL: BF16 1,671 TFLOPS sparse
  h100_nvl.fp16_flops = 835.5 * kTflops;
  h100_nvl.fp8_flops = 1670.5 * kTflops;      // H100 datasheet, NVL: FP8 3,341 TFLOPS sparse
  h100_nvl.source = "NVIDIA H100 Tensor Core GPU datasheet (NVL); CUDA C++ Programming Guide";
  t.push_back(h100_nvl);

  GpuSpec h100_pcie = h100;
  h100_pcie.name = "NVIDIA H100 PCIe";
  h100_pcie.aliases = {"H100-PCIe"};
  h100_pcie.mem_bandwidth_Bps = 2000 * kGBps;  // H100 datasheet, PCIe: 2 TB/s HBM2e
  h100_pcie.bf16_flops = 756.5 * kTflops;      // H100 datasheet, PCIe: BF16 1,513 TFLOPS sparse
  h100_pcie.fp16_flops = 756.5 * kTflops;
  h100_pcie.fp8_flops = 1513 * kTflops;        // H100 datasheet, PCIe: FP8 3,026 TFLOPS sparse
  h100_pcie.sm_count = 114;                    // Hopper whitepaper: H100 PCIe has 114 SMs
  h100_pcie.source = "NVIDIA H100 Tensor Core GPU datasheet (PCIe); NVIDIA H100 (Hopper) "
                     "whitepaper; CUDA C++ Programming Guide";
  t.push_back(h100_pcie);

  GpuSpec h200_nvl = h200;
  h200_nvl.name = "NVIDIA H200 NVL";
  h200_nvl.aliases = {"H200-NVL"};
  h200_nvl.bf16_flops = 835.5 * kTflops;  // H200 datasheet, NVL: BF16 1,671 TFLOPS sparse
  h200_nvl.fp16_flops = 835.5 * kTflops;
  h200_nvl.fp8_flops = 1670.5 * kTflops;  // H200 datasheet, NVL: FP8 3,341 TFLOPS sparse
  h200_nvl.source = "NVIDIA H200 Tensor Core GPU datasheet (NVL: 4.8 TB/s); CUDA C++ "
                    "Programming Guide";
  t.push_back(h200_nvl);

  // Grace Hopper: the H100 SXM's GH100 (132 SMs, the same tensor-core peaks) with its own HBM.
  // The driver names 96 GB HBM3 boards by their CPU memory (480 GB or 120 GB of LPDDR5X) or their
  // HBM (96GB), the 144 GB HBM3e one by its HBM. Names as drivers report them (seen in vLLM's
  // fused-MoE config file names and device queries), so that tables are named as servers look
  // them up.
  GpuSpec gh200 = h100;
  gh200.name = "NVIDIA GH200 480GB";
  gh200.aliases = {"GH200", "GH200-480GB"};
  gh200.mem_bandwidth_Bps = 4000 * kGBps;  // GH200 datasheet: 96 GB HBM3, 4 TB/s
  gh200.source = "NVIDIA GH200 Grace Hopper Superchip datasheet (96 GB HBM3: 4 TB/s; H100 SXM "
                 "tensor cores); NVIDIA H100 (Hopper) whitepaper; CUDA C++ Programming Guide";
  t.push_back(gh200);
  GpuSpec gh200_120 = gh200;  // the same GPU and HBM with 120 GB of CPU memory
  gh200_120.name = "NVIDIA GH200 120GB";
  gh200_120.aliases = {"GH200-120GB"};
  t.push_back(gh200_120);
  GpuSpec gh200_96 = gh200;
  gh200_96.name = "NVIDIA GH200 96GB";
  gh200_96.aliases = {"GH200-96GB"};
  t.push_back(gh200_96);
  GpuSpec gh200_e = gh200;
  gh200_e.name = "NVIDIA GH200 144G HBM3e";
  gh200_e.aliases = {"GH200-144GB"};
  gh200_e.mem_bandwidth_Bps = 4900 * kGBps;  // GH200 datasheet: 144 GB HBM3e, 4.9 TB/s
  gh200_e.source = "NVIDIA GH200 Grace Hopper Superchip datasheet (144 GB HBM3e: 4.9 TB/s; H100 "
                   "SXM tensor cores); NVIDIA H100 (Hopper) whitepaper; CUDA C++ Programming Guide";
  t.push_back(gh200_e);

  GpuSpec h20;
  h20.name = "NVIDIA H20";
  h20.aliases = {"H20"};
  h20.mem_bandwidth_Bps = 4000 * kGBps;  // H20 product brief: 96 GB HBM3, 4.0 TB/s
  h20.bf16_flops = 148 * kTflops;        // H20 product brief: BF16/FP16 148 TFLOPS dense
  h20.fp16_flops = 148 * kTflops;
  h20.fp8_flops = 296 * kTflops;         // H20 product brief: FP8 296 TFLOPS dense
  h20.sm_count = 78;                     // device query as reported (cut-down GH100)
  h20.smem_per_block_bytes = kSmemSm90;
  h20.l2_bytes = 60 * kMiB;              // H20 product brief: 60 MB L2
  h20.cc_major = 9, h20.cc_minor = 0;
  h20.source = "NVIDIA H20 product brief (China market); CUDA C++ Programming Guide "
               "(compute capabilities); SM count from device queries";
  t.push_back(h20);

  GpuSpec b200;
  b200.name = "NVIDIA B200";
  b200.aliases = {"B200", "HGX B200"};
  b200.mem_bandwidth_Bps = 8000 * kGBps;  // HGX B200 datasheet: 8 TB/s HBM3e per GPU
  b200.bf16_flops = 2250 * kTflops;       // HGX B200 datasheet: BF16 36 PFLOPS sparse / 8 GPUs
  b200.fp16_flops = 2250 * kTflops;       // same as BF16
  b200.fp8_flops = 4500 * kTflops;        // HGX B200 datasheet: FP8 72 PFLOPS sparse / 8 GPUs
  b200.sm_count = 148;                    // Blackwell architecture technical brief / device query
  b200.smem_per_block_bytes = kSmemSm90;  // cc 10.0: 227 KB, as cc 9.0
  b200.l2_bytes = 126 * kMiB;             // device query: 126 MB L2 (two dies)
  b200.cc_major = 10, b200.cc_minor = 0;
  b200.source = "NVIDIA HGX B200 datasheet (per-GPU = 1/8, dense = 1/2 sparse); NVIDIA "
                "Blackwell architecture technical brief; CUDA C++ Programming Guide";
  t.push_back(b200);

  // GB202 professional boards: 188 SMs. Datasheet: 4,000 AI TOPS = FP4 with sparsity, so dense
  // FP4 2,000, dense FP8 1,000 and dense FP16/BF16 500 TFLOPS (5th-gen tensor cores: FP4 = 2x
  // FP8 = 4x FP16). Professional boards keep the full rate with fp32 accumulate.
  GpuSpec pro_server;
  pro_server.name = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
  pro_server.aliases = {"RTX PRO 6000", "RTX PRO 6000 Server", "RTX PRO 6000 Blackwell",
                        "RTX PRO 6000 SE", "RTX6000 PRO"};
  pro_server.mem_bandwidth_Bps = 1597 * kGBps;  // Server Edition datasheet: 1,597 GB/s GDDR7
  pro_server.bf16_flops = 500 * kTflops;        // derived from the 4,000 AI TOPS above
  pro_server.fp16_flops = 500 * kTflops;
  pro_server.fp8_flops = 1000 * kTflops;
  pro_server.sm_count = 188;                    // RTX Blackwell whitepaper: 24,064 cores / 128
  pro_server.smem_per_block_bytes = kSmemSm89;  // cc 12.0: 99 KB (DESIGN.md: 101,376 B)
  pro_server.l2_bytes = 128 * kMiB;             // RTX PRO 6000 Blackwell datasheet: 128 MB L2
  pro_server.cc_major = 12, pro_server.cc_minor = 0;
  pro_server.source = "NVIDIA RTX PRO 6000 Blackwell Server Edition datasheet; NVIDIA RTX "
                      "Blackwell GPU architecture whitepaper; CUDA C++ Programming Guide";
  t.push_back(pro_server);

  GpuSpec pro_ws = pro_server;
  pro_ws.name = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition";
  pro_ws.aliases = {"RTX PRO 6000 Workstation", "RTX PRO 6000 WS", "RTX PRO 6000 Blackwell WS"};
  pro_ws.mem_bandwidth_Bps = 1792 * kGBps;  // Workstation datasheet: 1,792 GB/s (512-bit, 28 Gbps)
  pro_ws.source = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet; NVIDIA RTX "
                  "Blackwell GPU architecture whitepaper; CUDA C++ Programming Guide";
  t.push_back(pro_ws);

  GpuSpec rtx5090;
  rtx5090.name = "NVIDIA GeForce RTX 5090";
  rtx5090.aliases = {"RTX 5090", "5090", "GeForce RTX 5090"};
  rtx5090.mem_bandwidth_Bps = 1792 * kGBps;  // RTX Blackwell whitepaper: 1,792 GB/s GDDR7
  rtx5090.bf16_flops = 209.5 * kTflops;      // whitepaper: FP16/BF16, FP32 accumulate, dense
  rtx5090.fp16_flops = 209.5 * kTflops;
  rtx5090.fp8_flops = 419 * kTflops;         // whitepaper: FP8, FP32 accumulate, dense
  rtx5090.sm_count = 170;                    // whitepaper: 170 SMs (21,760 cores)
  rtx5090.smem_per_block_bytes = kSmemSm89;  // cc 12.0: 99 KB
  rtx5090.l2_bytes = 96 * kMiB;              // whitepaper: 96 MB L2 (98,304 KB)
  rtx5090.cc_major = 12, rtx5090.cc_minor = 0;
  rtx5090.source = "NVIDIA RTX Blackwell GPU architecture whitepaper (GeForce RTX 5090); "
                   "CUDA C++ Programming Guide (compute capabilities)";
  t.push_back(rtx5090);

  GpuSpec l40s;
  l40s.name = "NVIDIA L40S";
  l40s.aliases = {"L40S"};
  l40s.mem_bandwidth_Bps = 864 * kGBps;   // L40S datasheet: 864 GB/s GDDR6
  l40s.bf16_flops = 362.05 * kTflops;     // L40S datasheet: BF16 362.05 | 733 TFLOPS
  l40s.fp16_flops = 362.05 * kTflops;     // L40S datasheet: FP16 362.05 | 733 TFLOPS
  l40s.fp8_flops = 733 * kTflops;         // L40S datasheet: FP8 733 | 1,466 TFLOPS
  l40s.sm_count = 142;                    // Ada whitepaper / device query: 18,176 cores / 128
  l40s.smem_per_block_bytes = kSmemSm89;  // cc 8.9: 99 KB
  l40s.l2_bytes = 96 * kMiB;              // Ada Lovelace whitepaper: AD102 96 MB L2
  l40s.cc_major = 8, l40s.cc_minor = 9;
  l40s.source = "NVIDIA L40S datasheet; NVIDIA Ada Lovelace architecture whitepaper; "
                "CUDA C++ Programming Guide (compute capabilities)";
  t.push_back(l40s);

  GpuSpec a100;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.aliases = {"A100", "A100-80GB", "A100 SXM4 80GB", "A100 SXM"};
  a100.mem_bandwidth_Bps = 2039 * kGBps;  // A100 datasheet, 80GB SXM: 2,039 GB/s HBM2e
  a100.bf16_flops = 312 * kTflops;        // A100 datasheet: BF16 312 | 624 TFLOPS
  a100.fp16_flops = 312 * kTflops;        // A100 datasheet: FP16 312 | 624 TFLOPS
  // No fp8 tensor cores on sm_80: fp8_flops stays empty.
  a100.sm_count = 108;                    // Ampere (GA100) whitepaper: A100 has 108 SMs
  a100.smem_per_block_bytes = kSmemSm80;  // cc 8.0: 163 KB
  a100.l2_bytes = 40 * kMiB;              // Ampere whitepaper: 40 MB L2
  a100.cc_major = 8, a100.cc_minor = 0;
  a100.source = "NVIDIA A100 Tensor Core GPU datasheet; NVIDIA A100 (Ampere) whitepaper; "
                "CUDA C++ Programming Guide (compute capabilities)";
  t.push_back(a100);

  GpuSpec a100_40 = a100;
  a100_40.name = "NVIDIA A100-SXM4-40GB";
  a100_40.aliases = {"A100-40GB", "A100 SXM4 40GB"};
  a100_40.mem_bandwidth_Bps = 1555 * kGBps;  // A100 datasheet, 40GB SXM: 1,555 GB/s HBM2
  t.push_back(a100_40);

  return t;
}

// Case-insensitive, with spaces, underscores and hyphens equivalent ("NVIDIA_H200" from a
// config file name matches "NVIDIA H200").
std::string normalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '_' || c == '-' || c == ' ') {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(static_cast<char>(std::tolower(c)));
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string GpuSpec::arch() const {
  if (!target_arch.empty()) return target_arch;
  // wgmma (sm_90a) and tcgen05 (sm_100a) exist only in the arch-specific targets.
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  if (cc_major == 10 && cc_minor == 0) return "sm_100a";
  return fmt::format("sm_{}{}", cc_major, cc_minor);
}

std::optional<int> arch_compute_capability(std::string_view arch) {
  for (const std::string_view prefix : {"sm_", "compute_"}) {
    if (arch.substr(0, prefix.size()) != prefix) continue;
    int cc = 0;
    std::size_t i = prefix.size();
    for (; i < arch.size() && arch[i] >= '0' && arch[i] <= '9' && cc < 100000; ++i)
      cc = cc * 10 + (arch[i] - '0');
    if (i > prefix.size()) return cc;
  }
  return std::nullopt;
}

GpuSpec gpu_for_arch(const GpuSpec& gpu, const std::string& arch) {
  if (arch.empty() || arch == gpu.arch()) return gpu;
  GpuSpec g = gpu;
  g.target_arch = arch;
  const std::optional<int> cc = arch_compute_capability(arch);
  if (cc && *cc >= 10) {  // "sm_89" -> 8.9, "sm_100a" -> 10.0
    g.cc_major = *cc / 10;
    g.cc_minor = *cc % 10;
  }
  return g;
}

std::optional<double> GpuSpec::peak_flops(Dtype d) const {
  switch (d) {
    case Dtype::bf16: return bf16_flops > 0 ? std::optional<double>(bf16_flops) : std::nullopt;
    case Dtype::fp16: return fp16_flops > 0 ? std::optional<double>(fp16_flops) : std::nullopt;
    case Dtype::fp8_w8a8: return fp8_flops;
  }
  return std::nullopt;
}

const std::vector<GpuSpec>& gpu_specs() {
  static const std::vector<GpuSpec> table = build_table();
  return table;
}

const GpuSpec* find_gpu(std::string_view name_or_alias) {
  const std::string key = normalize(name_or_alias);
  if (key.empty()) return nullptr;
  auto match = [](const std::string& k) -> const GpuSpec* {
    for (const GpuSpec& g : gpu_specs()) {
      if (normalize(g.name) == k) return &g;
      for (const std::string& a : g.aliases) {
        if (normalize(a) == k) return &g;
      }
    }
    return nullptr;
  };
  if (const GpuSpec* g = match(key)) return g;
  // "nvidia-h100" or "NVIDIA RTX 5090": the vendor prefix before an alias.
  constexpr std::string_view kVendor = "nvidia ";
  if (key.size() > kVendor.size() && key.compare(0, kVendor.size(), kVendor) == 0) {
    return match(key.substr(kVendor.size()));
  }
  return nullptr;
}

const GpuSpec& require_gpu(std::string_view name_or_alias) {
  if (const GpuSpec* g = find_gpu(name_or_alias)) return *g;
  std::vector<std::string> known;
  for (const GpuSpec& g : gpu_specs()) known.push_back(g.aliases.front());
  throw InputError("gpu", std::string(name_or_alias),
                   fmt::format("unknown GPU; known: {}", fmt::join(known, ", ")));
}

}  // namespace moetune
