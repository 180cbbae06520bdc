#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace striker::server {

std::string json_type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return "boolean";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "integer";
    case nlohmann::json::value_t::number_float: return "number";
    case nlohmann::json::value_t::string: return "string";
    case nlohmann::json::value_t::array: return "array";
    case nlohmann::json::value_t::object: return "object";
    default: return "value";
  }
}

bool JsonFields::has(const char* name) const { return get(name) != nullptr; }

const nlohmann::json* JsonFields::get(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

static std::string fmt_num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(int64_t(v));
  return nlohmann::json(v).dump();
}

std::optional<double> JsonFields::number(const char* name, double lo, double hi) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number()) {
    throw bad_request(std::string("`") + name + "` must be a number, got " + json_type_name(*v), name);
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    throw bad_request(std::string("`") + name + "` must be between " + fmt_num(lo) + " and " + fmt_num(hi) +
                          ", got " + v->dump(),
                      name);
  }
  return d;
}

std::optional<int64_t> JsonFields::integer(const char* name, int64_t lo, int64_t hi) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  int64_t out = 0;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > uint64_t(hi)) {
      throw bad_request(std::string("`") + name + "` must be at most " + std::to_string(hi) + ", got " + v->dump(),
                        name);
    }
    out = int64_t(u);
  } else if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
             v->get<double>() == std::floor(v->get<double>()) && std::fabs(v->get<double>()) < 9e15) {
    out = int64_t(v->get<double>());  // pydantic accepts 3.0 for an int field
  } else {
    throw bad_request(std::string("`") + name + "` must be an integer, got " + v->dump(), name);
  }
  if (out < lo || out > hi) {
    throw bad_request(std::string("`") + name + "` must be between " + std::to_string(lo) + " and " +
                          std::to_string(hi) + ", got " + std::to_string(out),
                      name);
  }
  return out;
}

std::optional<bool> JsonFields::boolean(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    throw bad_request(std::string("`") + name + "` must be a boolean, got " + json_type_name(*v), name);
  }
  return v->get<bool>();
}

std::optional<std::string> JsonFields::string(const char* name) const {
  const auto* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    throw bad_request(std::string("`") + name + "` must be a string, got " + json_type_name(*v), name);
  }
  return v->get<std::string>();
}

const nlohmann::json* JsonFields::object(const char* name) const {
  const auto* v = get(name);
  if (v && !v->is_object()) {
    throw bad_request(std::string("`") + name + "` must be an object, got " + json_type_name(*v), name);
  }
  return v;
}

const nlohmann::json* JsonFields::array(const char* name) const {
  const auto* v = get(name);
  if (v && !v->is_array()) {
    throw bad_request(std::string("`") + name + "` must be an array, got " + json_type_name(*v), name);
  }
  return v;
}

std::string item_path(const std::string& where, size_t index) { return where + "[" + std::to_string(index) + "]"; }

const nlohmann::ordered_json* item_field(const nlohmann::ordered_json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string required_item_string(const nlohmann::ordered_json& obj, const char* name, const std::string& where,
                                 const char* param) {
  const nlohmann::ordered_json* v = item_field(obj, name);
  if (!v || !v->is_string()) throw bad_request("`" + where + "." + name + "` must be a string", param);
  return v->get<std::string>();
}

}  // namespace striker::server
