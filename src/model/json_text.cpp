#include "model/json_text.hpp"

#include <set>
#include <vector>

namespace moetune::model {

nlohmann::json parse_json_text(const std::string& text) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> open;  // the keys seen in each object being parsed
  auto check = [&](int /*depth*/, Event event, nlohmann::json& parsed) {
    if (event == Event::object_start) {
      open.emplace_back();
    } else if (event == Event::object_end) {
      open.pop_back();
    } else if (event == Event::key && !open.back().insert(parsed.get<std::string>()).second) {
      throw DuplicateJsonKey("duplicate key \"" + parsed.get<std::string>() + "\"");
    }
    return true;
  };
  return nlohmann::json::parse(text, check);
}

}  // namespace moetune::model
