// Every case of tests/data/cases/shapes_expected.json: the expected shape fields exactly, or an
// InputError whose message holds each listed word. (--gpu and the file names are the CLI's.)
#include <algorithm>
#include <cctype>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

using nlohmann::json;

const std::string kData = MOETUNE_TEST_DATA;

struct Case {
  std::size_t index = 0;
  json data;
};

// Keeps ctest's test names readable (gtest prints the parameter otherwise as bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.data.dump(); }

// Read at test-registration time; an unreadable file leaves the list empty, which
// CasesFile.HasCases reports.
std::vector<Case> load_cases() {
  std::ifstream in(kData + "/cases/shapes_expected.json");
  const json doc = json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<Case> cases;
  if (doc.is_object() && doc.contains("cases")) {
    for (std::size_t i = 0; i < doc["cases"].size(); ++i) cases.push_back({i, doc["cases"][i]});
  }
  return cases;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The CLI's model options, from the case's args.
ModelOptions options_from_args(const json& args) {
  ModelOptions o;
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const std::string flag = args[i].get<std::string>();
    if (i + 1 >= args.size()) throw std::runtime_error("flag without value: " + flag);
    const std::string value = args[i + 1].get<std::string>();
    if (flag == "--tp")
      o.tp = std::stoi(value);
    else if (flag == "--ep")
      o.ep = std::stoi(value);
    else if (flag == "--dtype")
      o.dtype = value;
    else if (flag == "--block-shape")
      o.block_shape = parse_block_shape(value, "block-shape");
    else if (flag == "--experts")
      o.experts = std::stoi(value);
    else if (flag == "--topk")
      o.topk = std::stoi(value);
    else if (flag == "--intermediate")
      o.intermediate = std::stoi(value);
    else if (flag == "--hidden")
      o.hidden = std::stoi(value);
    else if (flag != "--gpu")
      throw std::runtime_error("unknown flag in case: " + flag);
  }
  return o;
}

void expect_field(const MoeShape& s, const std::string& key, const json& want) {
  SCOPED_TRACE("expect." + key);
  if (key == "architecture")
    EXPECT_EQ(s.architecture, want.get<std::string>());
  else if (key == "E")
    EXPECT_EQ(s.E, want.get<int>());
  else if (key == "E_global")
    EXPECT_EQ(s.E_global, want.get<int>());
  else if (key == "N")
    EXPECT_EQ(s.N, want.get<int>());
  else if (key == "K")
    EXPECT_EQ(s.K, want.get<int>());
  else if (key == "topk")
    EXPECT_EQ(s.topk, want.get<int>());
  else if (key == "tp")
    EXPECT_EQ(s.tp, want.get<int>());
  else if (key == "ep")
    EXPECT_EQ(s.ep, want.get<int>());
  else if (key == "moe_layers")
    EXPECT_EQ(s.moe_layers, want.get<int>());
  else if (key == "dtype")
    EXPECT_EQ(std::string(to_string(s.dtype)), want.get<std::string>());
  else if (key == "block_shape") {
    if (want.is_null()) {
      EXPECT_FALSE(s.block_shape.has_value());
    } else {
      ASSERT_TRUE(s.block_shape.has_value());
      EXPECT_EQ((*s.block_shape)[0], want[0].get<int>());
      EXPECT_EQ((*s.block_shape)[1], want[1].get<int>());
    }
  } else {
    ADD_FAILURE() << "this test does not know expect key " << key;
  }
}

class ShapesExpected : public ::testing::TestWithParam<Case> {};

TEST_P(ShapesExpected, MatchesCase) {
  const json& c = GetParam().data;
  SCOPED_TRACE(c.dump());
  const std::string path = kData + "/model_configs/" + c["file"].get<std::string>();
  const ModelOptions opts = options_from_args(c["args"]);
  if (c.contains("error")) {
    try {
      const MoeShape s = load_model(path, opts);
      ADD_FAILURE() << "no error; got E=" << s.E << " N=" << s.N << " K=" << s.K;
    } catch (const InputError& e) {
      for (const auto& word : c["error"]) {
        EXPECT_NE(lower(e.what()).find(lower(word.get<std::string>())), std::string::npos)
            << "message lacks '" << word.get<std::string>() << "': " << e.what();
      }
    }
    return;
  }
  ASSERT_TRUE(c.contains("expect"));
  const MoeShape s = load_model(path, opts);
  for (const auto& [key, want] : c["expect"].items()) expect_field(s, key, want);
  EXPECT_EQ(s.source, path);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string file = info.param.data["file"].get<std::string>();
  if (file.ends_with(".json")) file.resize(file.size() - 5);
  std::string name = std::to_string(info.param.index) + "_";
  for (const char ch : file) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, ShapesExpected, ::testing::ValuesIn(load_cases()), case_name);

TEST(CasesFile, HasCases) {
  const auto cases = load_cases();
  EXPECT_GE(cases.size(), 19u);
  for (const auto& c : cases) {
    EXPECT_TRUE(c.data.contains("expect") != c.data.contains("error")) << c.data.dump();
  }
}

}  // namespace
}  // namespace moetune
