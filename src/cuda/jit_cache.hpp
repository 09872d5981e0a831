// The on-disk cubin cache: one file per key, written atomically (unique temp file, fsync,
// rename), so two processes may fill it at once without locks; a reader sees a whole file or
// none, and a corrupt entry reads as a miss.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace moetune::cuda {

// $MOETUNE_CACHE_DIR, else $XDG_CACHE_HOME/moetune, else ~/.cache/moetune, else (no usable
// HOME) /tmp/moetune-cache-<uid>. Not created here.
std::string default_cache_dir();

struct CacheEntry {
  std::vector<char> cubin;
  std::string lowered_name;
};

class DiskCache {
 public:
  // The most an entry may hold (a cubin is at most a few MB): a larger file there is a miss.
  static constexpr std::size_t kMaxEntryBytes = std::size_t{256} << 20;

  explicit DiskCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string path_of(const std::string& key) const;  // <dir>/<key>.cubin
  // The entry, or nullopt when absent or invalid (not a regular file, more than kMaxEntryBytes,
  // bad magic, size, or not an ELF cubin). Never blocks on a FIFO.
  std::optional<CacheEntry> read(const std::string& key) const;
  // Creates the directory if needed; returns false (and leaves nothing behind) when the entry
  // cannot be written: a cache that cannot be written only costs compile time. `why`, if given,
  // then says why ("not a folder", "Permission denied", "<key>.cubin: not a regular file (a
  // FIFO)": something other than a regular file at the entry's name is left as it is).
  bool write(const std::string& key, const CacheEntry& entry, std::string* why = nullptr) const;
  // Removes temp files ("*.tmp.XXXXXX") older than max_age_s, left by a writer that died
  // between create and rename. Returns how many were removed. Never throws.
  int remove_stale_temps(double max_age_s = 3600) const;

 private:
  std::string dir_;
};

// Writes `bytes` to `path` atomically: unique temp file in the same directory, fsync, rename.
// Returns false on failure (the temp file is removed), with the reason in `why` if given.
bool write_file_atomic(const std::string& path, const std::string& bytes,
                       std::string* why = nullptr);

}  // namespace moetune::cuda
