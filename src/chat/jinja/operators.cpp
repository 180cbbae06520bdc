// Python semantics of the arithmetic operators (+ - * / // % **) on template values.
#include "chat/jinja/operators.h"

#include <cmath>

#include "chat/jinja/pyformat.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

[[noreturn]] void unsupported(const char* op, const Value& l, const Value& r) {
  throw Error(std::string("unsupported operand type(s) for ") + op + ": '" + l.type_name() + "' and '" +
              r.type_name() + "'");
}

[[noreturn]] void overflow() { throw Error("integer overflow (values beyond 64 bits are not supported)"); }

int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t sub_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t floordiv(int64_t a, int64_t b) {
  if (a == INT64_MIN && b == -1) throw Error("integer overflow (values beyond 64 bits are not supported)");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  if (m == 0) m = std::copysign(0.0, b);
  return m;
}

Value repeat(const Value& seq, int64_t n, size_t max_bytes) {
  if (n <= 0) return seq.is_string() ? Value(std::string()) : Value::list({}, seq.is_tuple());
  if (seq.is_string()) {
    if (seq.as_string().size() * static_cast<uint64_t>(n) > max_bytes)
      throw Error("string repetition result is too large");
    std::string out;
    out.reserve(seq.as_string().size() * n);
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  if (seq.as_list().size() * static_cast<uint64_t>(n) > 10'000'000) throw Error("list repetition result is too large");
  std::vector<Value> items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::list(std::move(items), seq.is_tuple());
}

}  // namespace

Value binary_operator(const std::string& op, const Value& l, const Value& r, size_t max_bytes) {
  // str % x is str.__mod__: an Undefined argument is only touched if the format uses it.
  if (op == "%" && l.is_string()) return Value(py_percent_format(l.as_string(), r));
  if (l.is_undefined()) l.raise_undefined();
  if (r.is_undefined()) r.raise_undefined();
  const bool nums = l.is_number() && r.is_number();
  const bool ints = nums && !l.is_float() && !r.is_float();
  if (op == "+") {
    if (ints) return Value(add_i(l.as_int(), r.as_int()));
    if (nums) return Value(l.as_float() + r.as_float());
    if (l.is_string() && r.is_string()) {
      if (l.as_string().size() + r.as_string().size() > max_bytes) throw Error("string concatenation result is too large");
      return Value(l.as_string() + r.as_string());
    }
    if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
      std::vector<Value> items = l.as_list();
      items.insert(items.end(), r.as_list().begin(), r.as_list().end());
      return Value::list(std::move(items), l.is_tuple());
    }
    if (l.is_list() && r.is_list())
      throw Error("can only concatenate " + l.type_name() + " (not \"" + r.type_name() + "\") to " + l.type_name());
    if (l.is_string())
      throw Error("can only concatenate str (not \"" + r.type_name() + "\") to str");
    unsupported("+", l, r);
  }
  if (op == "-") {
    if (ints) return Value(sub_i(l.as_int(), r.as_int()));
    if (nums) return Value(l.as_float() - r.as_float());
    unsupported("-", l, r);
  }
  if (op == "*") {
    if (ints) return Value(mul_i(l.as_int(), r.as_int()));
    if (nums) return Value(l.as_float() * r.as_float());
    if ((l.is_string() || l.is_list()) && (r.is_int() || r.is_bool())) return repeat(l, r.as_int(), max_bytes);
    if ((r.is_string() || r.is_list()) && (l.is_int() || l.is_bool())) return repeat(r, l.as_int(), max_bytes);
    unsupported("*", l, r);
  }
  if (op == "/") {
    if (!nums) unsupported("/", l, r);
    if (r.as_float() == 0) throw Error("division by zero");
    return Value(l.as_float() / r.as_float());
  }
  if (op == "//") {
    if (!nums) unsupported("//", l, r);
    if (ints) {
      if (r.as_int() == 0) throw Error("integer division or modulo by zero");
      return Value(floordiv(l.as_int(), r.as_int()));
    }
    if (r.as_float() == 0) throw Error("float floor division by zero");
    return Value(std::floor(l.as_float() / r.as_float()));
  }
  if (op == "%") {
    if (l.is_string()) return Value(py_percent_format(l.as_string(), r));
    if (!nums) unsupported("%", l, r);
    if (ints) {
      if (r.as_int() == 0) throw Error("integer division or modulo by zero");
      int64_t m = l.as_int() % r.as_int();
      if (m != 0 && ((m < 0) != (r.as_int() < 0))) m += r.as_int();
      return Value(m);
    }
    if (r.as_float() == 0) throw Error("float modulo");
    return Value(py_fmod(l.as_float(), r.as_float()));
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", l, r);
    if (ints && r.as_int() >= 0) {
      int64_t base = l.as_int(), e = r.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = mul_i(acc, base);
        e >>= 1;
        if (e > 0) base = mul_i(base, base);
      }
      return Value(acc);
    }
    if (l.as_float() == 0 && r.as_float() < 0) throw Error("0.0 cannot be raised to a negative power");
    return Value(std::pow(l.as_float(), r.as_float()));
  }
  throw Error("unknown operator " + op);
}


}  // namespace striker::jinja
