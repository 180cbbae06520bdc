#include "chat/jinja/pyformat.h"

#include <cmath>
#include <cstdio>

#include "chat/jinja/builtins.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

std::string pad(std::string s, int width, bool left_align, char fill) {
  int len = static_cast<int>(utf8_length(s));
  if (len >= width) return s;
  std::string padding(static_cast<size_t>(width - len), fill);
  return left_align ? s + padding : padding + s;
}

}  // namespace

std::string py_percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> list;
  const bool mapping = args.is_dict();
  if (args.is_tuple()) list = args.as_list();
  else list.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c != '%') {
      out.push_back(c);
      continue;
    }
    if (++i >= fmt.size()) throw Error("incomplete format");
    Value arg;
    bool have_arg = false;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) throw Error("incomplete format key");
      if (!mapping) throw Error("format requires a mapping");
      const Value* v = args.as_dict().find(fmt.substr(i + 1, close - i - 1));
      if (!v) throw Error("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      arg = *v;
      have_arg = true;
      i = close + 1;
    }
    bool left = false, zero = false, plus = false;
    for (; i < fmt.size() && std::string("-0+ #").find(fmt[i]) != std::string::npos; ++i) {
      if (fmt[i] == '-') left = true;
      if (fmt[i] == '0') zero = true;
      if (fmt[i] == '+') plus = true;
    }
    int width = 0;
    for (; i < fmt.size() && isdigit(static_cast<unsigned char>(fmt[i])); ++i) width = width * 10 + (fmt[i] - '0');
    int precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      precision = 0;
      for (++i; i < fmt.size() && isdigit(static_cast<unsigned char>(fmt[i])); ++i)
        precision = precision * 10 + (fmt[i] - '0');
    }
    if (i >= fmt.size()) throw Error("incomplete format");
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_arg) {
      if (mapping && list.size() == 1 && !args.is_tuple()) {
        arg = args;
      } else {
        if (next >= list.size()) throw Error("not enough arguments for format string");
        arg = list[next++];
      }
    }
    std::string piece;
    switch (conv) {
      case 's': piece = py_str(arg); if (precision >= 0) piece = utf8_encode(utf8_decode(piece).substr(0, precision)); break;
      case 'r': piece = py_repr(arg); break;
      case 'd':
      case 'i': {
        if (!arg.is_number()) throw Error("%d format: a real number is required, not " + arg.type_name());
        int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_float())) : arg.as_int();
        piece = std::to_string(v);
        if (plus && v >= 0) piece = "+" + piece;
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'g': {
        if (!arg.is_number()) throw Error("must be real number, not " + arg.type_name());
        char spec[16];
        std::snprintf(spec, sizeof spec, "%%%s.%d%c", plus ? "+" : "", precision < 0 ? 6 : precision, conv);
        char buf[512];
        std::snprintf(buf, sizeof buf, spec, arg.as_float());
        piece = buf;
        break;
      }
      case 'x':
      case 'X': {
        if (!arg.is_int() && !arg.is_bool()) throw Error("%x format: an integer is required, not " + arg.type_name());
        char buf[32];
        std::snprintf(buf, sizeof buf, conv == 'x' ? "%llx" : "%llX", static_cast<long long>(arg.as_int()));
        piece = buf;
        break;
      }
      default: throw Error(std::string("unsupported format character '") + conv + "'");
    }
    out += pad(piece, width, left, zero && !left && conv != 's' ? '0' : ' ');
  }
  // Python only complains about unused arguments when they are not a mapping-like object
  // (lists and dicts count as mappings there).
  const bool mapping_like = args.is_dict() || (args.is_list() && !args.is_tuple()) || args.is_undefined();
  if (!mapping_like && next < list.size()) throw Error("not all arguments converted during string formatting");
  return out;
}

std::string py_str_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw Error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) throw Error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      if (colon + 1 != field.size()) throw Error("str.format: format specs are not supported ('" + field + "')");
      field.resize(colon);
    }
    size_t conv = field.find('!');
    char conversion = 's';
    if (conv != std::string::npos) {
      if (conv + 2 != field.size() || (field[conv + 1] != 'r' && field[conv + 1] != 's'))
        throw Error("str.format: unsupported conversion in '" + field + "'");
      conversion = field[conv + 1];
      field.resize(conv);
    }
    size_t end_name = field.find_first_of(".[");
    std::string head = field.substr(0, end_name);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.positional.size()) throw Error("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      v = args.positional[auto_index++];
    } else if (isdigit(static_cast<unsigned char>(head[0]))) {
      size_t idx = std::stoul(head);
      if (idx >= args.positional.size()) throw Error("Replacement index " + head + " out of range for positional args tuple");
      v = args.positional[idx];
    } else {
      bool found = false;
      for (const auto& [k, val] : args.keyword)
        if (k == head) {
          v = val;
          found = true;
        }
      if (!found) throw Error("KeyError: '" + head + "'");
    }
    size_t p = end_name;
    while (p != std::string::npos && p < field.size()) {
      if (field[p] == '.') {
        size_t e = field.find_first_of(".[", p + 1);
        v = get_attribute(v, field.substr(p + 1, e == std::string::npos ? std::string::npos : e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string::npos) throw Error("Missing ']' in format string");
        std::string key = field.substr(p + 1, e - p - 1);
        bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = get_item(v, numeric ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
        p = e + 1;
      }
      if (v.is_undefined()) throw Error(v.undefined_hint());
    }
    out += conversion == 'r' ? py_repr(v) : py_str(v);
  }
  return out;
}

}  // namespace striker::jinja
