#include "loaders/strict_json.h"

#include <vector>

#include "core/error.h"

namespace striker {

using nlohmann::json;

namespace {

// Builds a json tree from SAX events while enforcing JsonLimits and unique keys. Returning
// false from any callback stops the parse at once; `error` says why.
class StrictBuilder {
 public:
  explicit StrictBuilder(const JsonLimits& limits) : limits_(limits) {}

  json root;
  std::string error;

  bool null() { return add(json(nullptr)); }
  bool boolean(bool v) { return add(json(v)); }
  bool number_integer(json::number_integer_t v) { return add(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return add(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return add(json(v)); }
  bool string(json::string_t& v) { return add(json(std::move(v))); }
  bool binary(json::binary_t&) { return fail("binary values are not JSON"); }

  bool start_object(size_t) { return open(json::object()); }
  bool start_array(size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    if (stack_.back()->contains(k)) return fail("duplicate key " + quote(k));
    pending_key_ = std::move(k);
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // Drop nlohmann's "[json.exception...] parse error at line 1, column 7: " prefix.
    std::string what = e.what();
    auto column = what.find("column ");
    auto colon = column == std::string::npos ? column : what.find(": ", column);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return fail("invalid JSON at byte " + std::to_string(position) + ": " + quote(what, 200));
  }

 private:
  bool fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return false;
  }

  // Places `v` in the current container (or as the root) and returns where it landed.
  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      if (top.size() >= limits_.max_array_items)
        return fail("an array has more than " + std::to_string(limits_.max_array_items) + " items"), nullptr;
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[pending_key_];
    slot = std::move(v);
    return &slot;
  }

  bool add(json&& v) { return place(std::move(v)) != nullptr; }

  bool open(json&& container) {
    if (stack_.size() >= limits_.max_depth)
      return fail("nesting is deeper than " + std::to_string(limits_.max_depth) + " levels");
    json* p = place(std::move(container));
    if (p == nullptr) return false;
    stack_.push_back(p);
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  const JsonLimits& limits_;
  std::vector<json*> stack_;
  std::string pending_key_;
};

}  // namespace

json parse_json_strict(std::string_view text, const std::string& source, const JsonLimits& limits) {
  StrictBuilder builder(limits);
  bool ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, true);
  if (!ok) throw Error(source + ": " + (builder.error.empty() ? std::string("invalid JSON") : builder.error));
  return std::move(builder.root);
}

std::string quote(std::string_view s, size_t max_chars) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  size_t n = 0;
  for (unsigned char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + "'";
}

}  // namespace striker
