// Atomic file write: a reader sees the old file or the whole new one, never a half-written
// table, even if the process dies or the machine loses power mid-write.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int err) {
  throw InputError("path", path.string(), fmt::format("cannot write: {}: {}", what,
                                                      std::strerror(err)));
}

// A name no other writer (thread or process) uses: pid plus a per-process counter.
std::filesystem::path temp_path_for(const std::filesystem::path& path) {
  static std::atomic<unsigned> counter{0};
  const std::string name = fmt::format(".{}.tmp.{}.{}", path.filename().string(),
                                       static_cast<long>(::getpid()), counter++);
  return path.parent_path() / name;
}

void write_all(int fd, const std::string& text, const std::filesystem::path& path) {
  const char* data = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path, "write", errno);
    data += n;
    left -= static_cast<size_t>(n);
  }
}

// The rename is durable only once the directory entry itself reaches the disk.
void fsync_dir(const std::filesystem::path& dir, const std::filesystem::path& path) {
  const std::string name = dir.empty() ? std::string(".") : dir.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(path, "open folder", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail(path, "fsync folder", err);
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path temp = temp_path_for(path);
  // 0666 & ~umask, like any new file (mkstemp's 0600 would survive the rename).
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(path, "create temp file", errno);
  try {
    write_all(fd, text, path);
    if (::fsync(fd) != 0) fail(path, "fsync", errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "close", err);
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "rename", err);
  }
  fsync_dir(path.parent_path(), path);
}

}  // namespace moetune
