#include "chat/glm47_args.h"

#include "chat/tool_json.h"

namespace striker {

namespace {

constexpr std::string_view kKeyOpen = "<arg_key>";
constexpr std::string_view kKeyClose = "</arg_key>";
constexpr std::string_view kValueOpen = "<arg_value>";
constexpr std::string_view kValueClose = "</arg_value>";

// Position of `<arg_value>` after `</arg_key>` at `key_close` and optional whitespace (`\s*`).
size_t value_open_after(std::string_view body, size_t key_close) {
  size_t k = key_close + kKeyClose.size();
  while (k < body.size() && python_is_space(body[k])) ++k;
  return body.substr(k, kValueOpen.size()) == kValueOpen ? k : std::string_view::npos;
}

void assign(std::vector<RawArg>& params, std::string key, std::string value, bool open) {
  for (auto& p : params) {
    if (p.key == key) {
      p.value = std::move(value);
      p.open = open;
      return;
    }
  }
  params.push_back({std::move(key), std::move(value), open});
}

}  // namespace

std::vector<RawArg> glm47_scan_args(std::string_view body, bool partial) {
  std::vector<RawArg> params;
  std::string remaining;  // body with the complete pairs cut out (re.sub(_ARG_RE, ""))
  size_t pos = 0, copied = 0;
  // Emulates finditer with the lazy groups' backtracking: for a start `<arg_key>`, the key
  // ends at the first `</arg_key>` that is followed by `\s*<arg_value>`; the value ends at
  // the first `</arg_value>` after that. Without any later `</arg_value>` nothing more can
  // match, so the scan stops.
  while (true) {
    const size_t open = body.find(kKeyOpen, pos);
    if (open == std::string_view::npos) break;
    size_t close = body.find(kKeyClose, open + kKeyOpen.size());
    size_t value_open = std::string_view::npos;
    while (close != std::string_view::npos) {
      value_open = value_open_after(body, close);
      if (value_open != std::string_view::npos) break;
      close = body.find(kKeyClose, close + 1);
    }
    if (close == std::string_view::npos) break;  // no later start can find a key end either
    const size_t value_close = body.find(kValueClose, value_open + kValueOpen.size());
    if (value_close == std::string_view::npos) break;
    const size_t key_begin = open + kKeyOpen.size();
    const size_t value_begin = value_open + kValueOpen.size();
    assign(params, std::string(python_strip(body.substr(key_begin, close - key_begin))),
           std::string(body.substr(value_begin, value_close - value_begin)), false);
    remaining.append(body.substr(copied, open - copied));
    pos = copied = value_close + kValueClose.size();
  }
  if (!partial) return params;
  remaining.append(body.substr(copied));
  // _PARTIAL_ARG_RE.search: the first `<arg_key>` whose key is closed and followed by
  // `<arg_value>`; the value runs to the end of the text.
  const size_t open = remaining.find(kKeyOpen);
  if (open == std::string::npos) return params;
  size_t close = remaining.find(kKeyClose, open + kKeyOpen.size());
  while (close != std::string::npos) {
    const size_t value_open = value_open_after(remaining, close);
    if (value_open != std::string_view::npos) {
      const size_t key_begin = open + kKeyOpen.size();
      const std::string key(python_strip(std::string_view(remaining).substr(key_begin, close - key_begin)));
      if (!key.empty()) assign(params, key, remaining.substr(value_open + kValueOpen.size()), true);
      break;
    }
    close = remaining.find(kKeyClose, close + 1);
  }
  return params;
}

ToolArguments::ToolArguments(const ToolSchema* schema, const std::vector<RawArg>& args) {
  const bool typed = schema != nullptr && schema->has_properties();
  for (const auto& arg : args) {
    Entry entry{arg.key, string_value(arg.value), !typed, arg.open};
    if (typed) {
      // Undeclared keys stay strings but are held back until the call closes.
      if (const auto types = schema->property_types(arg.key)) {
        entry.value = coerce_to_schema_types(arg.value, *types);
        entry.streamable = *types == std::set<std::string>{"string"};
      }
    }
    entries_.push_back(std::move(entry));
  }
}

bool ToolArguments::streams_open_tail() const {
  return !entries_.empty() && entries_.back().open && entries_.back().streamable && entries_.back().value.is_string;
}

std::string ToolArguments::json() const {
  std::string out = "{";
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (i) out += ", ";
    out += python_json_string(entries_[i].key) + ": " + entries_[i].value.json;
  }
  return out + "}";
}

std::string ToolArguments::safe_prefix() const {
  if (entries_.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i + 1 < entries_.size(); ++i) {
    out += python_json_string(entries_[i].key) + ": " + entries_[i].value.json + ", ";
  }
  const Entry& last = entries_.back();
  out += python_json_string(last.key) + ": ";
  if (last.streamable && last.value.is_string) out += last.value.json.substr(0, last.value.json.size() - 1);
  return out;
}

}  // namespace striker
