// --budget, --batch and --serving parsing: values, and InputError naming the field on junk.
#include <gtest/gtest.h>

#include "moetune/error.hpp"
#include "moetune/tuner.hpp"
#include "tune_test_util.hpp"

namespace moetune::tune {
namespace {

using testing::field_of;

TEST(ParseBudget, Units) {
  EXPECT_DOUBLE_EQ(parse_budget("90s"), 90);
  EXPECT_DOUBLE_EQ(parse_budget("5m"), 300);
  EXPECT_DOUBLE_EQ(parse_budget("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(parse_budget("2h"), 7200);
  EXPECT_DOUBLE_EQ(parse_budget("1h2m3s"), 3723);
  EXPECT_DOUBLE_EQ(parse_budget("1.5m"), 90);
  EXPECT_DOUBLE_EQ(parse_budget("300"), 300);
}

TEST(ParseBudget, JunkNamesTheField) {
  for (const char* bad : {"", "5x", "m", "0s", "30m1h", "5m5m", "1h30", "-5m", "5 m"}) {
    EXPECT_EQ(field_of([&] { parse_budget(bad); }), "budget") << bad;
  }
}

TEST(ParseBatchList, SortedUnique) {
  EXPECT_EQ(parse_batch_list("1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(parse_batch_list("64, 8,8,1"), (std::vector<int>{1, 8, 64}));
  for (const char* bad : {"", "1,,2", "0", "-4", "a", "1.5", "8x"}) {
    EXPECT_EQ(field_of([&] { parse_batch_list(bad); }), "batch") << bad;
  }
}

// The same three answers as every other command's --batch: which item, and why.
TEST(ParseBatchList, SaysWhichItemAndWhy) {
  auto why = [](const char* text) {
    try {
      parse_batch_list(text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(why("8,0").find("\"0\": must be at least 1"), std::string::npos) << why("8,0");
  EXPECT_NE(why("-3").find("\"-3\": must be at least 1"), std::string::npos) << why("-3");
  EXPECT_NE(why("1,abc").find("\"abc\": expected a positive integer"), std::string::npos);
  EXPECT_NE(why("99999999999999999999").find("out of range"), std::string::npos);
  EXPECT_NE(why("3000000000").find("out of range"), std::string::npos) << why("3000000000");
  EXPECT_NE(why("16777217").find("above 16777216 tokens"), std::string::npos) << why("16777217");
  EXPECT_EQ(why("16777216"), "accepted");
}

TEST(ServingBatchSizes, PowersOfTwoAndEndpointsTimesTokensPerStep) {
  EXPECT_EQ(serving_batch_sizes("concurrency=1..64,spec=3"),
            (std::vector<int>{4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(serving_batch_sizes("concurrency=1..64"),
            (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
  // Endpoints that are not powers of two are kept.
  EXPECT_EQ(serving_batch_sizes("concurrency=3..50,spec=1"),
            (std::vector<int>{6, 8, 16, 32, 64, 100}));
  EXPECT_EQ(serving_batch_sizes("concurrency=8"), (std::vector<int>{8}));
  EXPECT_EQ(serving_batch_sizes("spec=0,concurrency=2..2"), (std::vector<int>{2}));
}

TEST(ServingBatchSizes, JunkNamesTheField) {
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=64..1"); }), "serving.concurrency");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=a..b"); }), "serving.concurrency");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=0..8"); }), "serving.concurrency");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=1..8,spec=-1"); }), "serving.spec");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=1..8,draft=3"); }), "serving");
  EXPECT_EQ(field_of([] { serving_batch_sizes("spec=3"); }), "serving");
  EXPECT_EQ(field_of([] { serving_batch_sizes("1..64"); }), "serving");
}

// The batch sizes --serving makes stay under --batch's cap (kMaxBatch), also where 1 + spec
// would overflow an int (it read "batch=-2147483648").
TEST(ServingBatchSizes, CappedAsBatchWithoutOverflow) {
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=1..8,spec=2147483647"); }), "serving");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=1..99999999"); }), "serving");
  EXPECT_EQ(field_of([] { serving_batch_sizes("concurrency=4096,spec=4096"); }), "serving");
  EXPECT_EQ(serving_batch_sizes("concurrency=4096,spec=4095"), (std::vector<int>{kMaxBatch}));
  try {  // the message names the concurrency typed, not a power of two on the way to it
    serving_batch_sizes("concurrency=1..99999999");
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("concurrency 99999999 x 1 tokens per step"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moetune::tune
