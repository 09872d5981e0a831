// Reading back a file moetune did not necessarily write (a user's input, a cache entry): only a
// regular file, only up to a cap. Opened without blocking and checked on the open descriptor,
// so a FIFO at the name cannot block the run, /dev/zero cannot be read without end, and nothing
// can be swapped in between the check and the read. Header-only: src/model and src/cuda both
// use it and neither depends on the other.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace moetune::io {

// Why a file of this mode is not read or replaced ("" for a regular file).
inline std::string not_regular_text(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a folder, not a regular file";
  if (S_ISFIFO(mode)) return "not a regular file (a FIFO)";
  if (S_ISCHR(mode)) return "not a regular file (a character device)";
  if (S_ISBLK(mode)) return "not a regular file (a block device)";
  if (S_ISSOCK(mode)) return "not a regular file (a socket)";
  return "not a regular file";
}

// The bytes of the regular file at `path` (symlinks followed), or why not, ready to print:
// "cannot open the file: <errno text>", not_regular_text, "<n> bytes, more than the <cap> MiB
// <kind> may hold" (also "it grew while being read, ..."), "cannot read the file".
struct FileBytes {
  std::optional<std::string> bytes;
  std::string why;
};
inline FileBytes read_regular_file(const std::string& path, std::uintmax_t max_bytes,
                                   const std::string& kind) {
  FileBytes r;
  const auto too_large = [&](const std::string& size) {
    return size + ", more than the " + std::to_string(max_bytes >> 20) + " MiB " + kind +
           " may hold";
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    r.why = std::string("cannot open the file: ") + std::strerror(errno);
    return r;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    r.why = "cannot read the file";
  } else if (!S_ISREG(st.st_mode)) {
    r.why = not_regular_text(st.st_mode);
  } else if (static_cast<std::uintmax_t>(st.st_size) > max_bytes) {
    r.why = too_large(std::to_string(st.st_size) + " bytes");
  }
  if (!r.why.empty()) {
    ::close(fd);
    return r;
  }
  // Read to the end, not to the size fstat gave: a file may grow meanwhile, and some (in /proc)
  // report 0 bytes. The cap still bounds what is held.
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(st.st_size));
  char chunk[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.why = "cannot read the file";
      break;
    }
    if (n == 0) break;
    if (bytes.size() + static_cast<std::size_t>(n) > max_bytes) {
      r.why = too_large("it grew while being read");
      break;
    }
    bytes.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (r.why.empty()) r.bytes = std::move(bytes);
  return r;
}

// Why an existing `path` may not be replaced by a cache write, or "" when it may (absent, or a
// regular file): a FIFO or a device that a user put there is theirs, not the cache's.
inline std::string not_replaceable_reason(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";  // a symlink to /dev/zero is a device
  return not_regular_text(st.st_mode);
}

}  // namespace moetune::io
