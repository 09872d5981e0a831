// parse_json_text: nlohmann's parser plus duplicate keys, in linear time; read_json_file_text:
// only regular files of a sane size.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/json_text.hpp"
#include "model_test_util.hpp"
#include "moetune/error.hpp"

namespace moetune {
namespace {

namespace fs = std::filesystem;
using model::DuplicateJsonKey;
using model::parse_json_text;
using model::read_json_file_text;
using nlohmann::json;
using testing::contains;
using testing::input_error;

std::string duplicate_of(const std::string& text) {
  try {
    parse_json_text(text);
  } catch (const DuplicateJsonKey& e) {
    return e.what();
  }
  return "(none)";
}

TEST(JsonText, DuplicateKeys) {
  EXPECT_EQ(duplicate_of(R"({"a": 1, "a": 2})"), "duplicate key \"a\"");
  EXPECT_EQ(duplicate_of(R"({"x": {"b": 1, "c": 2, "b": 3}})"), "duplicate key \"b\"");
  EXPECT_EQ(duplicate_of(R"([{"a": 1}, {"b": [{"c": 1, "c": 2}]}])"), "duplicate key \"c\"");
  // The key is checked where it is read, before the rest of the text.
  EXPECT_EQ(duplicate_of(R"({"a": 1, "a")"), "duplicate key \"a\"");
  // The same key in sibling objects, or in a parent and a child, is fine.
  const json ok = parse_json_text(R"({"a": {"x": 1}, "b": {"x": 2}, "x": [{"x": 3}, {"x": 4}]})");
  EXPECT_EQ(ok["b"]["x"], 2);
  EXPECT_EQ(ok["x"][1]["x"], 4);
}

// Anything else is nlohmann's own error: same type and text as json::parse gives, the first
// error in the text winning over a later duplicate.
TEST(JsonText, OtherErrorsAreNlohmanns) {
  for (const std::string text :
       {"", "{", "[1, 2", R"({"a": x, "a": 1})", R"({"1": {"M": 1e999}})", "{} trailing"}) {
    SCOPED_TRACE(text);
    std::string expected;
    try {
      const json parsed = json::parse(text);
      ADD_FAILURE() << "json::parse accepted it: " << parsed.dump();
    } catch (const json::parse_error& e) {
      expected = std::string("parse_error ") + e.what();
    } catch (const json::out_of_range& e) {
      expected = std::string("out_of_range ") + e.what();
    }
    std::string got;
    try {
      (void)parse_json_text(text);
    } catch (const json::parse_error& e) {
      got = std::string("parse_error ") + e.what();
    } catch (const json::out_of_range& e) {
      got = std::string("out_of_range ") + e.what();
    }
    EXPECT_EQ(got, expected);
  }
  EXPECT_EQ(parse_json_text(R"({"a": [1, 2.5, "s", null, true], "b": {}})"),
            json::parse(R"({"a": [1, 2.5, "s", null, true], "b": {}})"));
}

// A config table of 30,000 entries: nlohmann's callback parser (the duplicate check before)
// rescanned the table at each entry's end, 12 s on a 2-core VM; now about 0.25 s.
TEST(JsonText, LargeTableParsesInLinearTime) {
  constexpr int kEntries = 30000;
  std::string text = "{";
  for (int m = 1; m <= kEntries; ++m) {
    text += fmt::format(
        R"({}"{}": {{"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, )"
        R"("GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 3}})",
        m == 1 ? "" : ",\n", m);
  }
  text += "}";
  const auto t0 = std::chrono::steady_clock::now();
  const json j = parse_json_text(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(j.size(), static_cast<std::size_t>(kEntries));
  EXPECT_LT(s, 2.0) << "parsing " << kEntries << " entries took " << s << " s";
  // The duplicate check still sees the whole table: a repeat at the very end is found.
  text.back() = ',';
  text += R"("7": {}})";
  EXPECT_EQ(duplicate_of(text), "duplicate key \"7\"");
}

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
