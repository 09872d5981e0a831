// read_json_file_text: only regular files of a sane size.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/json_text.hpp"
#include "model_test_util.hpp"
#include "moetune/error.hpp"

namespace moetune {
namespace {

namespace fs = std::filesystem;
using model::read_json_file_text;
using testing::contains;
using testing::input_error;

// A fresh folder per test, removed afterwards.
class JsonFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moetune_json_text_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(JsonFile, ReadsARegularFileAndALinkToOne) {
  const fs::path p = dir_ / "a.json";
  std::ofstream(p) << R"({"a": 1})";
  EXPECT_EQ(read_json_file_text(p, "model"), R"({"a": 1})");
  fs::create_symlink(p, dir_ / "link.json");
  EXPECT_EQ(read_json_file_text(dir_ / "link.json", "model"), R"({"a": 1})");
  std::ofstream(dir_ / "empty.json").flush();
  EXPECT_EQ(read_json_file_text(dir_ / "empty.json", "model"), "");
}

TEST_F(JsonFile, RefusesWhatIsNotARegularFile) {
  const InputError folder = input_error([&] { read_json_file_text(dir_, "config"); });
  EXPECT_EQ(folder.field(), "config");
  EXPECT_EQ(folder.value(), dir_.string());
  EXPECT_EQ(folder.reason(), "a folder, not a regular file");
  fs::create_directory_symlink(dir_, dir_ / "to_folder");
  EXPECT_EQ(input_error([&] { read_json_file_text(dir_ / "to_folder", "model"); }).reason(),
            "a folder, not a regular file");

  // A FIFO with no writer: opening it would block forever.
  const fs::path fifo = dir_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const InputError f = input_error([&] { read_json_file_text(fifo, "model"); });
  EXPECT_EQ(f.field(), "model");
  EXPECT_EQ(f.value(), fifo.string());
  EXPECT_EQ(f.reason(), "not a regular file (a FIFO)");

  // /dev/zero never ends.
  if (fs::exists("/dev/zero")) {
    EXPECT_EQ(input_error([&] { read_json_file_text("/dev/zero", "model"); }).reason(),
              "not a regular file (a character device)");
  }
  const InputError missing = input_error([&] { read_json_file_text(dir_ / "none.json", "model"); });
  EXPECT_TRUE(contains(missing.reason(), "cannot open the file")) << missing.reason();
}

TEST_F(JsonFile, RefusesAFileOverTheCap) {
  // Sparse: no disk space used, yet larger than the cap.
  const fs::path big = dir_ / "big.json";
  std::ofstream(big).flush();
  fs::resize_file(big, model::kMaxJsonFileBytes + 1);
  const InputError e = input_error([&] { read_json_file_text(big, "config"); });
  EXPECT_EQ(e.field(), "config");
  EXPECT_EQ(e.value(), big.string());
  EXPECT_EQ(e.reason(), fmt::format("{} bytes, more than the 64 MiB a JSON input may hold",
                                    model::kMaxJsonFileBytes + 1));
  fs::resize_file(big, model::kMaxJsonFileBytes);  // the cap itself is allowed
  EXPECT_EQ(read_json_file_text(big, "config").size(), model::kMaxJsonFileBytes);
}

}  // namespace
}  // namespace moetune
