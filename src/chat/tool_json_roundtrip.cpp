// json.dumps(json.loads(text), ensure_ascii=False), built from SAX events so that what a
// DOM would lose survives: integers of any size, and Python's dict rule for a repeated key.
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "chat/tool_json.h"

namespace striker {

namespace {

// A parsed value with its scalars already in Python text form.
struct Node {
  enum class Kind { Scalar, Array, Object } kind = Kind::Scalar;
  std::string scalar;
  bool is_string = false;
  std::vector<Node> items;                               // array items, or object values
  std::vector<std::string> keys;                         // object keys, first-seen order
  std::unordered_map<std::string, size_t> key_index;     // key -> position in keys/items
};

// Python int(text) of an integer literal JSON allows (no leading zeros, optional '-').
std::string canonical_integer(const std::string& raw) {
  const bool negative = !raw.empty() && raw[0] == '-';
  const std::string digits = raw.substr(negative ? 1 : 0);
  if (digits.find_first_not_of('0') == std::string::npos) return "0";
  return (negative ? "-" : "") + digits;
}

class Builder : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return scalar("null", false); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false", false); }
  bool number_integer(number_integer_t v) override { return scalar(std::to_string(v), false); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(std::to_string(v), false); }
  bool number_float(number_float_t v, const string_t& raw) override {
    // nlohmann reads an integer too large for 64 bits as a float; Python keeps it exact.
    if (raw.find_first_of(".eE") == std::string::npos) return scalar(canonical_integer(raw), false);
    if (!std::isfinite(v)) return false;  // json.loads gives inf; vLLM rejects non-finite values
    return scalar(python_float_repr(v), false);
  }
  bool string(string_t& v) override { return scalar(python_json_string(v), true); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override { return open(Node::Kind::Object); }
  bool key(string_t& k) override {
    pending_key_ = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Node::Kind::Array); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

  Node root;
  bool has_root = false;

 private:
  bool scalar(std::string text, bool is_string) {
    Node node;
    node.scalar = std::move(text);
    node.is_string = is_string;
    place(std::move(node));
    return true;
  }
  bool open(Node::Kind kind) {
    Node node;
    node.kind = kind;
    open_.push_back(std::move(node));
    keys_.push_back(pending_key_);
    return true;
  }
  bool close() {
    Node node = std::move(open_.back());
    open_.pop_back();
    pending_key_ = std::move(keys_.back());
    keys_.pop_back();
    place(std::move(node));
    return true;
  }
  void place(Node node) {
    if (open_.empty()) {
      root = std::move(node);
      has_root = true;
      return;
    }
    Node& parent = open_.back();
    if (parent.kind == Node::Kind::Array) {
      parent.items.push_back(std::move(node));
      return;
    }
    // Python dict assignment: a repeated key keeps its first position, takes the new value.
    const auto [it, inserted] = parent.key_index.emplace(pending_key_, parent.items.size());
    if (inserted) {
      parent.keys.push_back(pending_key_);
      parent.items.push_back(std::move(node));
    } else {
      parent.items[it->second] = std::move(node);
    }
  }

  std::vector<Node> open_;          // containers being filled, innermost last
  std::vector<std::string> keys_;   // the key each open container will be stored under
  std::string pending_key_;
};

void render(const Node& node, std::string& out) {
  switch (node.kind) {
    case Node::Kind::Scalar: out += node.scalar; return;
    case Node::Kind::Array:
      out += '[';
      for (size_t i = 0; i < node.items.size(); ++i) {
        if (i) out += ", ";
        render(node.items[i], out);
      }
      out += ']';
      return;
    case Node::Kind::Object:
      out += '{';
      for (size_t i = 0; i < node.items.size(); ++i) {
        if (i) out += ", ";
        out += python_json_string(node.keys[i]) + ": ";
        render(node.items[i], out);
      }
      out += '}';
      return;
  }
}

// Whether brackets nest deeper than `limit` (outside strings): such text is not treated as
// JSON, since rendering recurses per level (and Python's json.loads would fail as well).
bool nests_deeper_than(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

std::optional<PythonJsonValue> python_json_roundtrip(std::string_view text) {
  if (nests_deeper_than(text, 256)) return std::nullopt;
  Builder builder;
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  if (!ok || !builder.has_root) return std::nullopt;
  PythonJsonValue value;
  render(builder.root, value.text);
  value.is_string = builder.root.kind == Node::Kind::Scalar && builder.root.is_string;
  return value;
}

}  // namespace striker
