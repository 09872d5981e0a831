// Every file of tests/data/model_configs either parses or throws InputError, whatever the
// options: no other exception, no crash.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/model.hpp"

namespace moetune {
namespace {

namespace fs = std::filesystem;

TEST(AllConfigs, ParseOrInputError) {
  int files = 0, parsed = 0;
  for (const auto& entry :
       fs::directory_iterator(std::string(MOETUNE_TEST_DATA) + "/model_configs")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    for (const char* dtype : {"auto", "bf16", "fp16", "fp8_w8a8"}) {
      for (const auto& [tp, ep] : {std::pair{1, 1}, {2, 1}, {8, 1}, {1, 8}, {3, 3}}) {
        SCOPED_TRACE(entry.path().filename().string() + " " + dtype + " tp" + std::to_string(tp) +
                     " ep" + std::to_string(ep));
        ModelOptions o;
        o.dtype = dtype;
        o.tp = tp;
        o.ep = ep;
        try {
          const MoeShape s = load_model(entry.path().string(), o);
          ++parsed;
          EXPECT_EQ(s.E * ep, s.E_global);
          EXPECT_GT(s.N, 0);
          EXPECT_LE(s.topk, s.E_global);
        } catch (const InputError& e) {
          EXPECT_FALSE(e.field().empty()) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << "not an InputError: " << e.what();
        }
      }
    }
  }
  EXPECT_GE(files, 25);
  EXPECT_GT(parsed, files * 4);  // most combinations are fine
}

TEST(AllConfigs, EachParsesAsBf16) {
  // All files are MoE models: as bf16 with no parallelism, none is refused.
  for (const auto& entry :
       fs::directory_iterator(std::string(MOETUNE_TEST_DATA) + "/model_configs")) {
    if (entry.path().extension() != ".json") continue;
    ModelOptions o;
    o.dtype = "bf16";
    EXPECT_NO_THROW(load_model(entry.path().string(), o)) << entry.path();
  }
}

}  // namespace
}  // namespace moetune
