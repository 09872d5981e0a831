#include <string>

#include <gtest/gtest.h>

#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune {
namespace {

const ConfigTable& table_18() {
  static const ConfigTable t = to_table(
      read_config_table(std::string(MOETUNE_TEST_DATA) + "/cases/config_table_18.json"));
  return t;
}

// tests/data/cases/README.md: the nearest key wins, a tie goes to the smaller key.
TEST(ConfigLookup, ReadmeCases) {
  EXPECT_EQ(nearest_key(table_18(), 20), 16);
  EXPECT_EQ(nearest_key(table_18(), 3), 2);
  EXPECT_EQ(nearest_key(table_18(), 1280), 1024);
  EXPECT_EQ(nearest_key(table_18(), 5000), 4096);
  EXPECT_EQ(nearest_key(table_18(), 1), 1);
  EXPECT_EQ(nearest_key(table_18(), 100), 96);
}

TEST(ConfigLookup, EveryKeyFindsItself) {
  for (const auto& [M, config] : table_18()) EXPECT_EQ(nearest_key(table_18(), M), M);
}

TEST(ConfigLookup, TieGoesToTheSmallerKeyAndOneMoreGoesUp) {
  EXPECT_EQ(nearest_key(table_18(), 20), 16);    // 16 and 24 both 4 away
  EXPECT_EQ(nearest_key(table_18(), 21), 24);
  EXPECT_EQ(nearest_key(table_18(), 384), 256);  // 256 and 512 both 128 away
  EXPECT_EQ(nearest_key(table_18(), 385), 512);
  EXPECT_EQ(nearest_key(table_18(), 3584), 3072);
  EXPECT_EQ(nearest_key(table_18(), 3585), 4096);
}

TEST(ConfigLookup, OutsideTheKeysTakesTheEnds) {
  EXPECT_EQ(nearest_key(table_18(), 0), 1);
  EXPECT_EQ(nearest_key(table_18(), -5), 1);
  EXPECT_EQ(nearest_key(table_18(), 2147483647), 4096);
}

TEST(ConfigLookup, ReturnsTheEntry) {
  EXPECT_EQ(lookup(table_18(), 5000), (KernelConfig{128, 128, 128, 32, 8, 3, 1}));
  EXPECT_EQ(lookup(table_18(), 1280).BLOCK_SIZE_N, 64);  // the 1024 entry
}

TEST(ConfigLookup, EmptyTableIsAnInputError) {
  try {
    nearest_key({}, 8);
    FAIL() << "no error for an empty table";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "config");
    EXPECT_EQ(e.value(), "{}");
    EXPECT_EQ(e.reason(), "empty table");
  }
}

TEST(ConfigLookup, DownFallsBackToUpOnlyWhenEmpty) {
  ConfigTable up, down;
  up[1] = {16, 64, 128, 1, 4, 4, 1};
  up[64] = {64, 128, 128, 16, 4, 3, 1};
  EXPECT_EQ(&lookup_down(up, down, 40), &up.at(64));
  down[1] = {16, 32, 128, 1, 4, 5, 4};
  // A non-empty down table answers on its own, even far from its keys.
  EXPECT_EQ(&lookup_down(up, down, 40), &down.at(1));
  EXPECT_EQ(lookup_down(up, down, 1).SPLIT_K, 4);
}

}  // namespace
}  // namespace moetune
