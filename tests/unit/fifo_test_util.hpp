// A test of a FIFO that must not block: the call runs on a thread of its own, and if it is still
// blocked after a while (it opened the FIFO, which waits for a writer, or reads it), the test
// fails and the FIFO is given a writer that closes at once, so that the call sees an empty file
// and returns. A hang then fails one test instead of hanging the suite.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

namespace moetune::testing {

// f() (its value, or its exception), failing the test when it blocked on `fifo` for `limit`.
template <class F>
auto unless_blocked_on(const std::filesystem::path& fifo, F&& f,
                       std::chrono::seconds limit = std::chrono::seconds(10)) {
  auto call = std::async(std::launch::async, std::forward<F>(f));
  if (call.wait_for(limit) == std::future_status::timeout) {
    ADD_FAILURE() << "blocked for " << limit.count() << " s on the FIFO " << fifo;
    while (call.wait_for(std::chrono::milliseconds(50)) == std::future_status::timeout) {
      // Succeeds once the call has the read end open; closing it at once is the end of file.
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
    }
  }
  return call.get();
}

}  // namespace moetune::testing
