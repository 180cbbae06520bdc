#include "core/ordered_json.h"

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace striker {
namespace {

using ojson = nlohmann::ordered_json;

// A SAX consumer that builds the value in place. Only the innermost open container grows, so
// pointers into its ancestors stay valid while it is built.
class OrderedBuilder {
 public:
  using number_integer_t = ojson::number_integer_t;
  using number_unsigned_t = ojson::number_unsigned_t;
  using number_float_t = ojson::number_float_t;
  using string_t = ojson::string_t;
  using binary_t = ojson::binary_t;

  explicit OrderedBuilder(ojson& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool v) { return put(v); }
  bool number_integer(number_integer_t v) { return put(v); }
  bool number_unsigned(number_unsigned_t v) { return put(v); }
  bool number_float(number_float_t v, const string_t&) { return put(v); }
  bool string(string_t& v) { return put(std::move(v)); }
  bool binary(binary_t& v) { return put(ojson::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    // ordered_map is a vector of pairs; its own find / emplace scan for the key, so use the vector.
    auto& members = static_cast<ojson::object_t::Container&>(f.value->get_ref<ojson::object_t&>());
    size_t at = members.size();
    if (members.size() < kIndexFrom) {
      for (size_t i = 0; i < members.size(); ++i)
        if (members[i].first == k) at = i;
    } else {
      if (f.index.empty())
        for (size_t i = 0; i < members.size(); ++i) f.index.emplace(members[i].first, i);
      at = f.index.try_emplace(k, members.size()).first->second;
    }
    if (at == members.size()) members.emplace_back(std::move(k), nullptr);
    f.slot = &members[at].second;
    return true;
  }

  template <class Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& e) {
    throw e;
  }

 private:
  // Below this many keys a scan is cheaper than a hash index.
  static constexpr size_t kIndexFrom = 32;

  struct Frame {
    ojson* value;
    std::unordered_map<std::string, size_t> index;  // key -> position, built once the object is large
    ojson* slot = nullptr;                          // where the value of the last key goes
  };

  ojson* place(ojson v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_array()) {
      f.value->push_back(std::move(v));
      return &f.value->back();
    }
    *f.slot = std::move(v);
    return f.slot;
  }
  bool put(ojson v) {
    place(std::move(v));
    return true;
  }
  bool open(ojson v) {
    stack_.push_back(Frame{place(std::move(v)), {}, nullptr});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  ojson& root_;
  std::vector<Frame> stack_;
};

}  // namespace

void append_new_key(ojson& object, const std::string& key, ojson value) {
  static_cast<ojson::object_t::Container&>(object.get_ref<ojson::object_t&>()).emplace_back(key, std::move(value));
}

void merge_keys(ojson& into, const ojson& from) {
  auto& members = static_cast<ojson::object_t::Container&>(into.get_ref<ojson::object_t&>());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < members.size(); ++i) index.emplace(members[i].first, i);
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (const auto found = index.find(it.key()); found != index.end()) {
      members[found->second].second = it.value();
    } else {
      index.emplace(it.key(), members.size());
      members.emplace_back(it.key(), it.value());
    }
  }
}

ojson parse_ordered_json(std::string_view text) {
  ojson out;
  OrderedBuilder builder(out);
  ojson::sax_parse(text, &builder);
  return out;
}

}  // namespace striker
