// Cache directory choice, the entry format and atomic file writes.
//
// Entry format (little-endian): "MOETUNE-CUBIN-1\n" (16 bytes), u64 name length, u64 cubin
// length, the lowered name, the cubin. The file size must equal the sum exactly.
#include "cuda/jit_cache.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "io/regular_file.hpp"

namespace moetune::cuda {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "MOETUNE-CUBIN-1\n";
constexpr std::size_t kMagicBytes = 16;
constexpr std::size_t kHeaderBytes = kMagicBytes + 16;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

bool usable_dir(const std::string& home) {
  if (home.empty()) return false;
  struct stat st {};
  return ::stat(home.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && ::access(home.c_str(), W_OK) == 0;
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

bool is_elf(const std::vector<char>& bytes) {
  return bytes.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

}  // namespace

std::string default_cache_dir() {
  if (auto d = env("MOETUNE_CACHE_DIR"); !d.empty()) return d;
  if (auto x = env("XDG_CACHE_HOME"); !x.empty()) return x + "/moetune";
  std::string home = env("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) {
      home = pw->pw_dir;
    }
  }
  if (usable_dir(home)) return home + "/.cache/moetune";
  return "/tmp/moetune-cache-" + std::to_string(::getuid());
}

std::string DiskCache::path_of(const std::string& key) const { return dir_ + "/" + key + ".cubin"; }

std::optional<CacheEntry> DiskCache::read(const std::string& key) const {
  const io::FileBytes read = io::read_regular_file(path_of(key), kMaxEntryBytes, "a cache entry");
  if (!read.bytes) return std::nullopt;
  const std::string& bytes = *read.bytes;
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0) {
    return std::nullopt;
  }
  std::uint64_t name_len = get_u64(bytes.data() + kMagicBytes);
  std::uint64_t cubin_len = get_u64(bytes.data() + kMagicBytes + 8);
  if (name_len > bytes.size() || cubin_len > bytes.size() ||
      kHeaderBytes + name_len + cubin_len != bytes.size()) {
    return std::nullopt;
  }
  CacheEntry e;
  e.lowered_name.assign(bytes.data() + kHeaderBytes, name_len);
  e.cubin.assign(bytes.begin() + static_cast<std::ptrdiff_t>(kHeaderBytes + name_len), bytes.end());
  if (!is_elf(e.cubin) || e.lowered_name.empty()) return std::nullopt;
  return e;
}

bool DiskCache::write(const std::string& key, const CacheEntry& entry, std::string* why) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec && !fs::is_directory(dir_)) {
    std::error_code ec2;
    if (why != nullptr) *why = fs::exists(dir_, ec2) ? "not a folder" : ec.message();
    return false;
  }
  // The rename would replace a FIFO or a device left at the entry's name: not the cache's to
  // replace. Left as it is; the entry is then never cached, which the caller tells.
  const std::string path = path_of(key);
  if (const std::string no = io::not_replaceable_reason(path); !no.empty()) {
    if (why != nullptr) *why = fs::path(path).filename().string() + ": " + no;
    return false;
  }
  std::string bytes(kMagic, kMagicBytes);
  put_u64(bytes, entry.lowered_name.size());
  put_u64(bytes, entry.cubin.size());
  bytes += entry.lowered_name;
  bytes.append(entry.cubin.data(), entry.cubin.size());
  return write_file_atomic(path, bytes, why);
}

int DiskCache::remove_stale_temps(double max_age_s) const {
  int removed = 0;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.find(".tmp.") == std::string::npos) continue;
    std::error_code ec2;
    auto mtime = fs::last_write_time(it->path(), ec2);
    if (ec2) continue;
    double age_s = std::chrono::duration<double>(now - mtime).count();
    if (age_s > max_age_s && fs::remove(it->path(), ec2)) ++removed;
  }
  return removed;
}

bool write_file_atomic(const std::string& path, const std::string& bytes, std::string* why) {
  auto fail = [&](int err) {
    if (why != nullptr) *why = std::generic_category().message(err);  // thread-safe strerror
    return false;
  };
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return fail(errno);
  ::fchmod(fd, 0644);
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  int err = 0;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;  // a write of 0 bytes: the device is full
      break;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmpl.c_str(), path.c_str()) != 0) err = errno;
  if (err == 0) return true;
  ::unlink(tmpl.c_str());
  return fail(err);
}

}  // namespace moetune::cuda
