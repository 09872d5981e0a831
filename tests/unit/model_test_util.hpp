// Shared helpers of the test_model_* unit tests: a model config of tests/data/model_configs, the
// InputError a call throws, and a substring check.
#pragma once
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"

namespace moetune::testing {

// tests/data/model_configs/<file>, parsed.
inline nlohmann::json model_config(const std::string& file) {
  std::ifstream in(std::string(MOETUNE_TEST_DATA) + "/model_configs/" + file);
  return nlohmann::json::parse(in);
}

// The InputError a call throws (a test failure if it throws nothing or something else).
inline InputError input_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError thrown";
  return InputError("", "", "");
}

inline bool contains(const std::string& text, const std::string& word) {
  return text.find(word) != std::string::npos;
}

}  // namespace moetune::testing
