#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune {
namespace {

namespace fs = std::filesystem;

const std::string kCases = std::string(MOETUNE_TEST_DATA) + "/cases/";

// A fresh empty folder per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("moetune_config_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const nlohmann::json kEntry = {{"BLOCK_SIZE_M", 16}, {"BLOCK_SIZE_N", 64}, {"BLOCK_SIZE_K", 128},
                               {"GROUP_SIZE_M", 1},  {"num_warps", 4},     {"num_stages", 3}};

// The InputError thrown by parsing `table`, or a test failure if none is.
InputError parse_error(const nlohmann::json& table) {
  try {
    parse_config_table(table, "t.json");
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError for " << table.dump();
  return InputError("", "", "");
}

TEST(ConfigTableJson, ReadsEighteenEntries) {
  const ParsedTable t = read_config_table(kCases + "config_table_18.json");
  ASSERT_EQ(t.entries.size(), 18u);
  EXPECT_TRUE(t.skipped_keys.empty());
  EXPECT_EQ(t.entries.begin()->first, 1);
  EXPECT_EQ(t.entries.rbegin()->first, 4096);
  EXPECT_EQ(t.entries.at(4096).config, (KernelConfig{128, 128, 128, 32, 8, 3, 1}));
  EXPECT_EQ(t.entries.at(1).config, (KernelConfig{16, 64, 128, 1, 4, 5, 1}));
  EXPECT_EQ(t.entries.at(1024).config.BLOCK_SIZE_N, 64);
  for (const auto& [M, entry] : t.entries) EXPECT_TRUE(entry.unknown_keys.empty()) << M;
}

TEST(ConfigTableJson, SkipsNonIntegerKeysAndListsThem) {
  const nlohmann::json j = {{"triton_version", "3.1.0"}, {"8", kEntry}, {"note", {{"a", 1}}}};
  const ParsedTable t = parse_config_table(j, "t.json");
  ASSERT_EQ(t.entries.size(), 1u);
  EXPECT_EQ(t.entries.count(8), 1u);
  EXPECT_EQ(t.skipped_keys, (std::vector<std::string>{"note", "triton_version"}));
}

TEST(ConfigTableJson, RefusesNumericLookingKeysThatAreNotPlainPositiveInts) {
  for (const std::string key : {"-4", "0", "00", "01", "+8", "1e3", "1.5", "12abc", " 7",
                                "2147483648", "99999999999"}) {
    const InputError e = parse_error({{key, kEntry}});
    EXPECT_EQ(e.field(), "config key") << key;
    EXPECT_EQ(e.value(), "\"" + key + "\"") << key;
    EXPECT_NE(e.reason().find("t.json"), std::string::npos) << e.what();
  }
  EXPECT_NE(parse_error({{"-4", kEntry}}).reason().find("positive"), std::string::npos);
  EXPECT_NE(parse_error({{"01", kEntry}}).reason().find("leading zero"), std::string::npos);
  EXPECT_NE(parse_error({{"1e3", kEntry}}).reason().find("decimal"), std::string::npos);
  // The largest int is still a batch size.
  EXPECT_EQ(parse_config_table({{"2147483647", kEntry}}, "t").entries.count(2147483647), 1u);
}

TEST(ConfigTableJson, EntryThatIsNotAnObjectNamesTheKey) {
  const InputError e = parse_error({{"16", 64}});
  EXPECT_EQ(e.field(), "config[16]");
  EXPECT_EQ(e.value(), "64");
}

TEST(ConfigTableJson, ValueThatIsNotAPositiveIntegerNamesKeyAndValue) {
  const std::vector<std::pair<nlohmann::json, std::string>> bad = {
      {"64", "\"64\""}, {64.0, "64.0"}, {64.5, "64.5"}, {0, "0"},
      {-64, "-64"},     {true, "true"}, {nullptr, "null"}, {3000000000LL, "3000000000"}};
  for (const auto& [value, text] : bad) {
    nlohmann::json entry = kEntry;
    entry["BLOCK_SIZE_N"] = value;
    const InputError e = parse_error({{"16", entry}});
    EXPECT_EQ(e.field(), "config[16].BLOCK_SIZE_N") << text;
    EXPECT_EQ(e.value(), text);
    EXPECT_EQ(e.reason(), "must be a positive integer");
  }
}

// json::dump recurses once per level: formatting the message for a value nested 100,000 deep
// overflowed the stack (a segfault instead of exit 2).
TEST(ConfigTableJson, DeeplyNestedValueIsAShortInputError) {
  // Built by moves: copying such a value recurses as deeply as dump did.
  const std::string text = std::string(100000, '[') + std::string(100000, ']');
  nlohmann::json table = nlohmann::json::object();
  table["16"] = nlohmann::json::parse(text);
  InputError e = parse_error(table);
  EXPECT_EQ(e.field(), "config[16]");
  EXPECT_LE(e.value().size(), 63u);
  table["16"] = kEntry;
  table["16"]["BLOCK_SIZE_N"] = nlohmann::json::parse(text);
  e = parse_error(table);
  EXPECT_EQ(e.field(), "config[16].BLOCK_SIZE_N");
  EXPECT_EQ(e.value().rfind("[[[[", 0), 0u) << e.value();
}

TEST(ConfigTableJson, MissingClassicKeyIsAnErrorButSplitKDefaultsToOne) {
  for (const char* key : kClassicKeys) {
    nlohmann::json entry = kEntry;
    entry.erase(key);
    const InputError e = parse_error({{"2", entry}});
    EXPECT_EQ(e.field(), std::string("config[2].") + key);
    EXPECT_EQ(e.value(), "(missing)");
  }
  EXPECT_EQ(parse_config_table({{"2", kEntry}}, "t").entries.at(2).config.SPLIT_K, 1);
  nlohmann::json split = kEntry;
  split["SPLIT_K"] = 4;
  EXPECT_EQ(parse_config_table({{"2", split}}, "t").entries.at(2).config.SPLIT_K, 4);
  // SWAP_AB: optional, 0 by default, 0 is a value (validation narrows to {0, 1}), -1 is not.
  EXPECT_EQ(parse_config_table({{"2", kEntry}}, "t").entries.at(2).config.SWAP_AB, 0);
  nlohmann::json swap = kEntry;
  swap["SWAP_AB"] = 0;
  EXPECT_EQ(parse_config_table({{"2", swap}}, "t").entries.at(2).config.SWAP_AB, 0);
  swap["SWAP_AB"] = 1;
  EXPECT_EQ(parse_config_table({{"2", swap}}, "t").entries.at(2).config.SWAP_AB, 1);
  swap["SWAP_AB"] = -1;
  const InputError e = parse_error({{"2", swap}});
  EXPECT_EQ(e.field(), "config[2].SWAP_AB");
  EXPECT_EQ(e.value(), "-1");
}

// Written after SPLIT_K only when set, so a table without swap-AB keeps the servers' schema; the
// short name gains "_ab1" (names of unswapped configs are those of every earlier log).
TEST(ConfigTableJson, SwapAbIsWrittenOnlyWhenSet) {
  KernelConfig c{16, 128, 128, 1, 4, 3, 1, 1};
  EXPECT_EQ(to_json(c)["SWAP_AB"], 1);
  const std::string text = dump_config_table({{8, c}});
  EXPECT_NE(text.find("\"SWAP_AB\": 1"), std::string::npos) << text;
  EXPECT_LT(text.find("\"num_stages\""), text.find("\"SWAP_AB\"")) << text;
  EXPECT_EQ(config_name(c), "m16n128k128_g1_w4_s3_sk1_ab1");
  c.SWAP_AB = 0;
  EXPECT_FALSE(to_json(c).contains("SWAP_AB"));
  EXPECT_EQ(config_name(c), "m16n128k128_g1_w4_s3_sk1");
}

TEST(ConfigTableJson, UnknownConfigKeysAreKeptForValidation) {
  nlohmann::json entry = kEntry;
  entry["waves_per_eu"] = 2;
  entry["USE_TMA"] = true;
  const ParsedTable t = parse_config_table({{"32", entry}}, "t");
  EXPECT_EQ(t.entries.at(32).unknown_keys, (std::vector<std::string>{"USE_TMA", "waves_per_eu"}));
  EXPECT_EQ(t.entries.at(32).config, (KernelConfig{16, 64, 128, 1, 4, 3, 1}));
  EXPECT_EQ(to_table(t).at(32), t.entries.at(32).config);
}

// Only a regular file of a sane size is read: a FIFO blocked forever, /dev/zero grew memory
// without bound, and a 400 MB file cost 785 MB before its parse error.
TEST(ConfigTableJson, OnlyRegularFilesOfASaneSize) {
  TempDir dir;
  auto reason = [](const fs::path& p) {
    try {
      read_config_table(p);
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "config");
      EXPECT_EQ(e.value(), p.string());
      return e.reason();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(reason(dir.path()), "a folder, not a regular file");
  const fs::path fifo = dir.path() / "t.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(reason(fifo), "not a regular file (a FIFO)");
  if (fs::exists("/dev/zero")) {
    EXPECT_EQ(reason("/dev/zero"), "not a regular file (a character device)");
  }
  const fs::path big = dir.path() / "big.json";
  std::ofstream(big).flush();
  fs::resize_file(big, std::uintmax_t{400} << 20);  // sparse: no disk space used
  EXPECT_EQ(reason(big), "419430400 bytes, more than the 64 MiB a JSON input may hold");
}

TEST(ConfigTableJson, FileErrorsNameThePath) {
  TempDir dir;
  const fs::path missing = dir.path() / "missing.json";
  try {
    read_config_table(missing);
    FAIL() << "no error for a missing file";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
    EXPECT_EQ(e.value(), missing.string());
  }
  const fs::path broken = dir.path() / "broken.json";
  std::ofstream(broken) << "{\"1\": {\"BLOCK_SIZE_M\": 16,";
  try {
    read_config_table(broken);
    FAIL() << "no error for invalid JSON";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
    EXPECT_EQ(e.value(), broken.string());
    EXPECT_EQ(e.reason().rfind("invalid JSON: ", 0), 0u) << e.reason();
  }
  // Two entries for one batch size: nlohmann would keep the last silently.
  const fs::path dup = dir.path() / "dup.json";
  std::ofstream(dup) << R"({"64": {"BLOCK_SIZE_M": 16}, "64": {"BLOCK_SIZE_M": 64}})";
  try {
    read_config_table(dup);
    FAIL() << "no error for a duplicate batch size";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
    EXPECT_EQ(e.reason(), "invalid JSON: duplicate key \"64\"");
  }
  // A number too large for a double is nlohmann's out_of_range, not parse_error: it escaped as
  // an internal error (exit 1).
  const fs::path overflow = dir.path() / "overflow.json";
  std::ofstream(overflow) << R"({"1": {"BLOCK_SIZE_M": 1e999}})";
  try {
    read_config_table(overflow);
    FAIL() << "no error for 1e999";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
    EXPECT_EQ(e.value(), overflow.string());
    EXPECT_NE(e.reason().find("1e999"), std::string::npos) << e.reason();
  }
  const fs::path array = dir.path() / "array.json";
  std::ofstream(array) << "[1, 2]";
  EXPECT_THROW(read_config_table(array), InputError);
  EXPECT_THROW(read_config_table(dir.path()), InputError);
}

TEST(ConfigTableJson, WritesNumericOrderClassicKeysFourSpaces) {
  ConfigTable t;
  t[1024] = {64, 128, 128, 16, 4, 3, 1};
  t[16] = {16, 64, 128, 1, 4, 4, 2};
  const std::string expected = R"({
    "16": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 4,
        "SPLIT_K": 2
    },
    "1024": {
        "BLOCK_SIZE_M": 64,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 128,
        "GROUP_SIZE_M": 16,
        "num_warps": 4,
        "num_stages": 3
    }
}
)";
  EXPECT_EQ(dump_config_table(t), expected);
  EXPECT_FALSE(to_json(t[1024]).contains("SPLIT_K"));
  EXPECT_EQ(to_json(t[16])["SPLIT_K"], 2);
  EXPECT_EQ(to_json(t).size(), 2u);
}

TEST(ConfigTableJson, RoundTripThroughAtomicWriteLeavesNoTempFile) {
  TempDir dir;
  const ConfigTable original = to_table(read_config_table(kCases + "config_table_18.json"));
  const fs::path path = dir.path() / "E=256,N=256,device_name=NVIDIA_H200.json";
  write_config_table(path, original);
  EXPECT_EQ(to_table(read_config_table(path)), original);
  EXPECT_EQ(dir.names(), std::vector<std::string>{path.filename().string()});

  // Overwriting replaces the whole file, again with no leftover.
  ConfigTable smaller;
  smaller[8] = {16, 128, 64, 1, 4, 2, 8};
  write_config_table(path, smaller);
  EXPECT_EQ(to_table(read_config_table(path)), smaller);
  EXPECT_EQ(dir.names(), std::vector<std::string>{path.filename().string()});
}

TEST(ConfigTableJson, ReadingSkipsButWritingDropsForeignKeys) {
  TempDir dir;
  const fs::path in = dir.path() / "in.json";
  std::ofstream(in) << R"({"triton_version": "3.1.0", "4": )" << kEntry.dump() << "}";
  const ParsedTable parsed = read_config_table(in);
  EXPECT_EQ(parsed.skipped_keys, std::vector<std::string>{"triton_version"});
  const fs::path out = dir.path() / "out.json";
  write_config_table(out, to_table(parsed));
  const nlohmann::json written = nlohmann::json::parse(read_text(out));
  EXPECT_EQ(written, (nlohmann::json{{"4", kEntry}}));
}

TEST(ConfigTableJson, AtomicWriteIntoMissingFolderFailsCleanly) {
  TempDir dir;
  const fs::path path = dir.path() / "no_such_folder" / "t.json";
  try {
    write_file_atomic(path, "{}\n");
    FAIL() << "no error writing into a missing folder";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "path");
    EXPECT_EQ(e.value(), path.string());
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(dir.names().empty());
}

TEST(ConfigTableJson, AtomicWriteKeepsExactBytes) {
  TempDir dir;
  const fs::path path = dir.path() / "x.txt";
  const std::string text(100000, 'x');
  write_file_atomic(path, text);
  EXPECT_EQ(read_text(path), text);
  write_file_atomic(path, "short");
  EXPECT_EQ(read_text(path), "short");
}

}  // namespace
}  // namespace moetune
