// Jit on the CPU: NVRTC compiles an embedded kernel for several archs with no GPU present; the
// disk cache is hit, missed on a changed option, survives corruption and concurrent writers.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "cuda/jit.hpp"
#include "cuda/jit_cache.hpp"
#include "cuda/kernel_sources.hpp"
#include "cuda/nvrtc.hpp"
#include "fifo_test_util.hpp"
#include "moetune/error.hpp"

namespace fs = std::filesystem;
using moetune::cuda::CompiledKernel;
using moetune::cuda::Jit;
using moetune::cuda::KernelSpec;

namespace {

fs::path fresh_dir(const std::string& tag) {
  fs::path dir =
      fs::temp_directory_path() / ("moetune-test-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

KernelSpec mma_peak_spec(const std::string& arch, const std::string& dtype = "__nv_bfloat16") {
  KernelSpec s;
  s.file = "mma_peak.cuh";
  s.kernel = "moetune::mma_peak";
  s.template_args = {{"T", dtype}, {"kChains", "4"}};
  s.arch = arch;
  s.name = "mma_peak_" + arch;
  return s;
}

bool is_elf(const std::vector<char>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

}  // namespace

// The launch wrapper's attribute choice: PDL asks for exactly one attribute,
// PROGRAMMATIC_STREAM_SERIALIZATION = 1, where the driver has cuLaunchKernelEx and is CUDA 12.3+;
// otherwise none (the plain cuLaunchKernel).
TEST(CudaLaunch, PdlAttributeSelection) {
  using moetune::cuda::launch_attributes;
  using moetune::cuda::LaunchOptions;
  LaunchOptions pdl;
  pdl.pdl = true;
  const auto on = launch_attributes(pdl, 12080, true);
  ASSERT_EQ(on.count, 1u);
  EXPECT_EQ(on.attrs[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(on.attrs[0].value.programmaticStreamSerializationAllowed, 1);
  EXPECT_EQ(launch_attributes(pdl, moetune::cuda::kPdlMinDriverVersion, true).count, 1u);
  EXPECT_EQ(launch_attributes(pdl, 13000, true).count, 1u);
  EXPECT_EQ(launch_attributes(pdl, 12020, true).count, 0u);  // graphs drop programmatic edges
  EXPECT_EQ(launch_attributes(pdl, 0, true).count, 0u);      // version unknown
  EXPECT_EQ(launch_attributes(pdl, 12080, false).count, 0u);  // no cuLaunchKernelEx
  EXPECT_EQ(launch_attributes(LaunchOptions{}, 12080, true).count, 0u);
}

TEST(CudaLaunch, ClusterAttribute) {
  // Clusters of cluster_x blocks along x (the sliced kernel's pairs): the attribute after PDL's,
  // with or without it; a cluster without cuLaunchKernelEx cannot launch at all.
  using moetune::cuda::launch_attributes;
  using moetune::cuda::LaunchOptions;
  LaunchOptions both;
  both.pdl = true;
  both.cluster_x = 2;
  const auto a = launch_attributes(both, 12080, true);
  ASSERT_EQ(a.count, 2u);
  EXPECT_EQ(a.attrs[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(a.attrs[1].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(a.attrs[1].value.clusterDim.x, 2u);
  EXPECT_EQ(a.attrs[1].value.clusterDim.y, 1u);
  EXPECT_EQ(a.attrs[1].value.clusterDim.z, 1u);
  LaunchOptions cluster;
  cluster.cluster_x = 2;
  const auto c = launch_attributes(cluster, 0, true);  // no PDL on an unknown driver
  ASSERT_EQ(c.count, 1u);
  EXPECT_EQ(c.attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_THROW(launch_attributes(cluster, 12080, false), moetune::CudaError);
  cluster.cluster_x = 1;
  EXPECT_EQ(launch_attributes(cluster, 12080, true).count, 0u);
}

TEST(CudaJit, EmbeddedSourcesPresent) {
  bool found = false;
  for (const auto& s : moetune::cuda::kernel_sources()) found |= s.path == "mma_peak.cuh";
  EXPECT_TRUE(found);
  EXPECT_EQ(moetune::cuda::kernel_source_hash().size(), 64u);
}

TEST(CudaJit, NvrtcLoads) {
  // Must FAIL, not skip, where NVRTC cannot be loaded: CI has the toolkit.
  std::string version = moetune::cuda::nvrtc_version();
  EXPECT_FALSE(version.empty());
  EXPECT_NE(version.find('.'), std::string::npos);
  EXPECT_FALSE(moetune::cuda::cuda_include_dir().empty()) << "cuda_bf16.h not found";
}

TEST(CudaJit, NameExpressionAndKey) {
  KernelSpec a = mma_peak_spec("sm_90a");
  EXPECT_EQ(a.name_expression(), "moetune::mma_peak<__nv_bfloat16, 4>");
  EXPECT_EQ(a.cache_key().size(), 64u);
  EXPECT_EQ(a.cache_key(), mma_peak_spec("sm_90a").cache_key());
  EXPECT_NE(a.cache_key(), mma_peak_spec("sm_80").cache_key());
  KernelSpec b = a;
  b.options = {"-DMOETUNE_TEST=1"};
  EXPECT_NE(a.cache_key(), b.cache_key());
  KernelSpec c = a;
  c.name = "another_name";  // the instance name is a label only
  EXPECT_EQ(a.cache_key(), c.cache_key());
  EXPECT_NE(a.generated_source().find("/*kChains*/ 4"), std::string::npos);
}

TEST(CudaJit, CompilesForEachArchAndCaches) {
  fs::path dir = fresh_dir("archs");
  for (const std::string arch : {"sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120"}) {
    Jit jit(dir.string());
    CompiledKernel first = jit.compile(mma_peak_spec(arch));
    EXPECT_FALSE(first.from_cache) << arch;
    EXPECT_TRUE(is_elf(first.cubin)) << arch;
    EXPECT_EQ(first.lowered_name.rfind("_ZN7moetune8mma_peak", 0), 0u) << first.lowered_name;
    EXPECT_TRUE(fs::exists(dir / (first.spec.cache_key() + ".cubin")));

    // A fresh process-like instance: served by the disk cache, same bytes.
    Jit again(dir.string());
    CompiledKernel second = again.compile(mma_peak_spec(arch));
    EXPECT_TRUE(second.from_cache) << arch;
    EXPECT_EQ(second.cubin, first.cubin);
    EXPECT_EQ(second.lowered_name, first.lowered_name);
    EXPECT_EQ(again.stats().disk_hits, 1);
    EXPECT_EQ(again.stats().nvrtc_compiles, 0);

    // The same instance: served by the in-memory map.
    CompiledKernel third = again.compile(mma_peak_spec(arch));
    EXPECT_TRUE(third.from_cache);
    EXPECT_EQ(again.stats().memory_hits, 1);
  }
  // fp8 mma for an sm_89+ target.
  Jit jit(dir.string());
  CompiledKernel fp8 = jit.compile(mma_peak_spec("sm_90a", "__nv_fp8_e4m3"));
  EXPECT_TRUE(is_elf(fp8.cubin));
  fs::remove_all(dir);
}

TEST(CudaJit, ChangedOptionMisses) {
  fs::path dir = fresh_dir("option");
  Jit jit(dir.string());
  jit.compile(mma_peak_spec("sm_80"));
  KernelSpec other = mma_peak_spec("sm_80");
  other.options = {"-lineinfo"};
  CompiledKernel r = jit.compile(other);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(jit.stats().nvrtc_compiles, 2);
  fs::remove_all(dir);
}

TEST(CudaJit, CorruptEntryIsRecompiled) {
  fs::path dir = fresh_dir("corrupt");
  KernelSpec spec = mma_peak_spec("sm_80");
  CompiledKernel good = Jit(dir.string()).compile(spec);
  fs::path file = dir / (spec.cache_key() + ".cubin");
  fs::resize_file(file, fs::file_size(file) / 2);  // a torn file
  Jit jit(dir.string());
  CompiledKernel r = jit.compile(spec);
  EXPECT_FALSE(r.from_cache);
  EXPECT_EQ(r.cubin, good.cubin);
  EXPECT_TRUE(Jit(dir.string()).compile(spec).from_cache);  // rewritten whole
  fs::remove_all(dir);
}

TEST(CudaJit, ConcurrentCompilesOfOneSpec) {
  fs::path dir = fresh_dir("concurrent");
  // Four independent instances (as four processes would be) racing on one entry.
  std::vector<CompiledKernel> results(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back(
        [&, t] { results[t] = Jit(dir.string()).compile(mma_peak_spec("sm_90a")); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) {
    EXPECT_TRUE(is_elf(r.cubin));
    EXPECT_EQ(r.cubin, results[0].cubin);
  }
  // No temp file left behind, exactly one entry.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
  }
  EXPECT_EQ(files, 1);
  // And one shared instance from four threads: one NVRTC compile, three waits.
  fs::path dir2 = fresh_dir("concurrent2");
  Jit shared(dir2.string());
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { results[t] = shared.compile(mma_peak_spec("sm_80")); });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(is_elf(r.cubin));
  EXPECT_EQ(shared.stats().nvrtc_compiles, 1);
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

TEST(CudaJit, CompileManyKeepsOrderAndCapturesFailures) {
  fs::path dir = fresh_dir("many");
  Jit jit(dir.string());
  KernelSpec bad = mma_peak_spec("sm_80");
  bad.template_args = {{"T", "__nv_bfloat16"}, {"kChains", "99"}};  // trips the static_assert
  bad.name = "bad";
  std::vector<KernelSpec> specs = {mma_peak_spec("sm_80"), bad, mma_peak_spec("sm_120")};
  auto results = jit.compile_many(specs, 3);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(is_elf(results[0].cubin));
  EXPECT_TRUE(results[1].cubin.empty());
  EXPECT_NE(results[1].log.find("kChains must be in [1, 16]"), std::string::npos) << results[1].log;
  EXPECT_EQ(results[1].spec.name, "bad");
  EXPECT_TRUE(is_elf(results[2].cubin));
  EXPECT_EQ(results[2].spec.arch, "sm_120");
  fs::remove_all(dir);
}

TEST(CudaJit, CompileManyAsyncOverlapsTheCaller) {
  fs::path dir = fresh_dir("async");
  Jit jit(dir.string());
  auto future = jit.compile_many_async({mma_peak_spec("sm_89", "__nv_fp8_e4m3"),
                                        mma_peak_spec("sm_90a", "__half")});
  auto results = future.get();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(is_elf(results[0].cubin)) << results[0].log;
  EXPECT_TRUE(is_elf(results[1].cubin)) << results[1].log;
  EXPECT_NE(results[0].lowered_name, results[1].lowered_name);
  fs::remove_all(dir);
}

TEST(CudaJit, CompileErrorsCarryTheLog) {
  fs::path dir = fresh_dir("error");
  Jit jit(dir.string());
  KernelSpec s = mma_peak_spec("sm_80");
  s.template_args = {{"T", "float"}, {"kChains", "4"}};  // no MmaPeakShape<float>
  try {
    jit.compile(s);
    ADD_FAILURE() << "no throw";
  } catch (const moetune::CudaError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("moetune::mma_peak<float, 4>"), std::string::npos) << what;
    EXPECT_NE(what.find("error"), std::string::npos) << what;
  }
  EXPECT_THROW(jit.compile(mma_peak_spec("")), moetune::InputError);
  fs::remove_all(dir);
}

// A cache that cannot be written costs compile time only, but is told (once per Jit, however
// many compile threads fail) to the process's handler, which the CLI prints as a note: it was
// silent, so a cache folder that is a file went unnoticed run after run.
TEST(CudaJit, UnwritableCacheIsToldOnce) {
  fs::path file = fresh_dir("cache-is-a-file");
  std::ofstream(file) << "not a folder";
  std::string why;
  EXPECT_FALSE(moetune::cuda::DiskCache(file.string()).write("k", {{'\x7f', 'E'}, "n"}, &why));
  EXPECT_EQ(why, "not a folder");

  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> told;
  auto previous = moetune::cuda::set_cache_write_failure_handler(
      [&](const std::string& dir, const std::string& reason) {
        std::lock_guard lock(mu);
        told.emplace_back(dir, reason);
      });
  Jit jit(file.string());
  std::vector<KernelSpec> specs;
  for (const std::string arch : {"sm_80", "sm_89", "sm_90a", "sm_120"}) {
    specs.push_back(mma_peak_spec(arch));
  }
  const std::vector<CompiledKernel> compiled = jit.compile_many(specs, 4);
  for (const CompiledKernel& k : compiled) EXPECT_TRUE(is_elf(k.cubin)) << k.spec.name << k.log;
  EXPECT_EQ(jit.stats().nvrtc_compiles, 4);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].first, file.string());
  EXPECT_EQ(told[0].second, "not a folder");
  EXPECT_TRUE(fs::is_regular_file(file));  // left as it was

  // A writable cache tells nothing.
  told.clear();
  fs::path dir = fresh_dir("cache-writable");
  Jit ok(dir.string());
  ok.compile(mma_peak_spec("sm_80"));
  EXPECT_TRUE(told.empty());
  moetune::cuda::set_cache_write_failure_handler(previous);
  fs::remove(file);
  fs::remove_all(dir);
}

// An entry that is not a regular file is a miss at once, and the cache leaves it as it is: a
// FIFO at an entry's name blocked the compile (and the run) forever in the read, a link to
// /dev/zero was read without end, and the compiled kernel was renamed over either.
TEST(CudaJit, EntryThatIsNotARegularFileIsAMissLeftAsItIs) {
  const fs::path dir = fresh_dir("cache-not-regular");
  fs::create_directories(dir);
  const moetune::cuda::DiskCache cache(dir.string());
  const moetune::cuda::CacheEntry entry{{'\x7f', 'E', 'L', 'F'}, "n"};

  const fs::path fifo = cache.path_of("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(moetune::testing::unless_blocked_on(fifo, [&] { return cache.read("fifo"); }));
  std::string why;
  EXPECT_FALSE(cache.write("fifo", entry, &why));
  EXPECT_EQ(why, "fifo.cubin: not a regular file (a FIFO)");
  EXPECT_TRUE(fs::is_fifo(fifo));

  fs::create_directory(cache.path_of("folder"));
  EXPECT_FALSE(cache.read("folder"));
  EXPECT_FALSE(cache.write("folder", entry, &why));
  EXPECT_EQ(why, "folder.cubin: a folder, not a regular file");

  if (fs::exists("/dev/zero")) {
    fs::create_symlink("/dev/zero", cache.path_of("zero"));
    EXPECT_FALSE(cache.read("zero"));
    EXPECT_FALSE(cache.write("zero", entry, &why));
    EXPECT_EQ(why, "zero.cubin: not a regular file (a character device)");
    EXPECT_TRUE(fs::is_symlink(cache.path_of("zero")));
  }

  // A regular file is still read, and replaced.
  ASSERT_TRUE(cache.write("ok", entry));
  ASSERT_TRUE(cache.read("ok"));
  EXPECT_EQ(cache.read("ok")->lowered_name, "n");
  fs::remove_all(dir);
}

// Through the Jit: the kernel is compiled (the FIFO is a miss), and the entry that cannot be
// cached is told once, like an unwritable cache folder, which the CLI prints as a note.
TEST(CudaJit, FifoEntryIsRecompiledAndToldOnce) {
  const fs::path dir = fresh_dir("cache-fifo-entry");
  fs::create_directories(dir);
  const moetune::cuda::DiskCache cache(dir.string());
  std::vector<KernelSpec> specs = {mma_peak_spec("sm_80"), mma_peak_spec("sm_90a")};
  for (const KernelSpec& s : specs) {
    ASSERT_EQ(::mkfifo(cache.path_of(s.cache_key()).c_str(), 0600), 0);
  }
  std::mutex mu;
  std::vector<std::string> told;
  auto previous = moetune::cuda::set_cache_write_failure_handler(
      [&](const std::string&, const std::string& reason) {
        std::lock_guard lock(mu);
        told.push_back(reason);
      });
  Jit jit(dir.string());
  for (const KernelSpec& s : specs) {
    const fs::path fifo = cache.path_of(s.cache_key());
    const CompiledKernel k =
        moetune::testing::unless_blocked_on(fifo, [&] { return jit.compile(s); });
    EXPECT_TRUE(is_elf(k.cubin)) << k.log;
    EXPECT_FALSE(k.from_cache);
    EXPECT_TRUE(fs::is_fifo(fifo));
  }
  EXPECT_EQ(jit.stats().nvrtc_compiles, 2);
  EXPECT_EQ(jit.stats().disk_hits, 0);
  moetune::cuda::set_cache_write_failure_handler(previous);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0], specs[0].cache_key() + ".cubin: not a regular file (a FIFO)");
  fs::remove_all(dir);
}

TEST(CudaJit, StaleTempFilesAreRemoved) {
  fs::path dir = fresh_dir("stale");
  fs::create_directories(dir);
  moetune::cuda::DiskCache cache(dir.string());
  std::ofstream(dir / "k.cubin.tmp.old123") << "half";
  std::ofstream(dir / "k.cubin.tmp.new456") << "half";
  std::ofstream(dir / "other.cubin") << "kept";
  fs::last_write_time(dir / "k.cubin.tmp.old123",
                      fs::file_time_type::clock::now() - std::chrono::hours(2));
  EXPECT_EQ(cache.remove_stale_temps(3600), 1);
  EXPECT_FALSE(fs::exists(dir / "k.cubin.tmp.old123"));
  EXPECT_TRUE(fs::exists(dir / "k.cubin.tmp.new456"));  // maybe a live writer
  EXPECT_TRUE(fs::exists(dir / "other.cubin"));
  EXPECT_FALSE(cache.read("other").has_value());  // not a valid entry
  fs::remove_all(dir);
}

TEST(CudaJit, CacheDirFromEnvironment) {
  const char* home = std::getenv("HOME");
  std::string saved_home = home ? home : "";
  ::setenv("MOETUNE_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(moetune::cuda::default_cache_dir(), "/some/where");
  ::unsetenv("MOETUNE_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(moetune::cuda::default_cache_dir(), "/xdg/moetune");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/nonexistent-home-dir", 1);
  EXPECT_EQ(moetune::cuda::default_cache_dir(), "/tmp/moetune-cache-" + std::to_string(::getuid()));
  ::setenv("HOME", "/tmp", 1);
  EXPECT_EQ(moetune::cuda::default_cache_dir(), "/tmp/.cache/moetune");
  if (home) ::setenv("HOME", saved_home.c_str(), 1);
}
