// Error types of moetune and the exit codes they map to. The library never prints or exits:
// it throws these, and only src/cli/main.cpp turns them into exit codes and one stderr line.
#pragma once
#include <stdexcept>
#include <string>

namespace moetune {

// Exit codes of the `moetune` binary (DESIGN.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;     // InputError
inline constexpr int kExitNoGpu = 3;        // GpuUnavailable
inline constexpr int kExitProblems = 4;     // the command ran and found problems

// Bad input: names the field and the value at fault. what() is "<field>=<value>: <reason>".
class InputError : public std::runtime_error {
 public:
  InputError(std::string field, std::string value, std::string reason)
      : std::runtime_error(field + "=" + value + ": " + reason),
        field_(std::move(field)), value_(std::move(value)), reason_(std::move(reason)) {}
  const std::string& field() const { return field_; }
  const std::string& value() const { return value_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string field_, value_, reason_;
};

// The command needs a GPU and none is usable (no driver, no device).
class GpuUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A CUDA driver or NVRTC call failed for another reason (internal error, exit 1).
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace moetune
