#include "engine/grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <set>

#include "engine/grammar/json_grammar.h"
#include "engine/grammar/regex_grammar.h"

namespace striker::grammar {
namespace {

// Ordered: `properties` are generated in the order the request wrote them.
using json = nlohmann::ordered_json;

// Keywords that never constrain the output.
const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "id", "$comment", "deprecated", "readOnly",
    "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding", "discriminator", "nullable_note",
    "strict", "$anchor", "$vocabulary"};
const std::set<std::string> kSupported = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems",
    "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
// Keywords that only constrain one type: present without "type", they imply it.
const std::map<std::string, std::string> kImpliedType = {
    {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"}, {"items", "array"},
    {"prefixItems", "array"}, {"minItems", "array"}, {"maxItems", "array"}, {"minLength", "string"},
    {"maxLength", "string"}, {"pattern", "string"}, {"format", "string"}, {"minimum", "number"},
    {"maximum", "number"}, {"exclusiveMinimum", "number"}, {"exclusiveMaximum", "number"}};

const std::map<std::string, std::string> kFormats = {
    {"date",
     "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-"
     "9]|2[0-8]))"},
    {"time", "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"},
    {"email", "[a-zA-Z0-9._%+-]{1,64}@(?:[a-zA-Z0-9-]{1,63}\\.){1,4}[a-zA-Z]{2,24}"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"ipv4",
     "(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
};

class SchemaCompiler {
 public:
  SchemaCompiler(Grammar& g, JsonPieces& p, const json& root) : g_(g), p_(p), root_(root) {}

  Element compile(const json& s, const std::string& path, int depth = 0) {
    if (depth > 128) fail(path, "$ref", "the schema nests more than 128 levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "false", "the schema `false` matches nothing");
      return p_.value();
    }
    if (!s.is_object()) fail(path, "type", "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (kAnnotations.count(k) || kSupported.count(k)) continue;
      fail(path, k, "the JSON schema keyword '" + k + "' is not supported for structured outputs");
    }
    if (s.contains("$ref")) return reference(s, path, depth);
    for (const char* comb : {"anyOf", "oneOf", "allOf"})
      if (s.contains(comb)) return combination(s, comb, path, depth);
    if (s.contains("const")) return literal_json(s["const"]);
    if (s.contains("enum")) return enumeration(s, path);
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const auto& x : t) {
          if (!x.is_string()) fail(path, "type", "`type` entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path, "type", "`type` must be a string or a non-empty array of strings");
      }
    } else {
      std::set<std::string> implied;
      for (const auto& [k, t] : kImpliedType)
        if (s.contains(k)) implied.insert(t);
      if (implied.size() > 1) fail(path, "type", "keywords of several types without `type`; add `type`");
      if (implied.empty()) return p_.value();
      types.push_back(*implied.begin());
    }
    std::vector<Sequence> alts;
    for (const auto& t : types) alts.push_back({typed(s, t, path, depth)});
    return alts.size() == 1 ? alts[0][0] : g_.alternatives("types", std::move(alts));
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& keyword, const std::string& why) {
    throw GrammarError(why + " (at " + (path.empty() ? "the schema root" : path) + ")", keyword);
  }

  static void only_annotations_besides(const json& s, const std::string& keyword, const std::string& path) {
    for (const auto& [k, v] : s.items())
      if (k != keyword && !kAnnotations.count(k))
        fail(path, k, "`" + keyword + "` together with '" + k + "' is not supported; move '" + k + "' into the branches");
  }

  Element reference(const json& s, const std::string& path, int depth) {
    only_annotations_besides(s, "$ref", path);
    if (!s["$ref"].is_string()) fail(path, "$ref", "`$ref` must be a string");
    const std::string ref = s["$ref"].get<std::string>();
    if (auto it = refs_.find(ref); it != refs_.end()) return Grammar::ref(it->second);
    if (ref.empty() || ref[0] != '#')
      fail(path, "$ref", "only local references (\"#...\") are supported, got '" + ref + "'");
    const json* target = &root_;
    if (ref.size() > 1) {
      try {
        target = &root_.at(json::json_pointer(ref.substr(1)));
      } catch (const std::exception&) {
        fail(path, "$ref", "the reference '" + ref + "' does not resolve");
      }
    }
    const int32_t rule = g_.add_rule("ref");
    refs_.emplace(ref, rule);
    g_.add_alt(rule, {compile(*target, ref, depth + 1)});
    return Grammar::ref(rule);
  }

  Element combination(const json& s, const std::string& comb, const std::string& path, int depth) {
    only_annotations_besides(s, comb, path);
    const json& list = s[comb];
    if (!list.is_array() || list.empty()) fail(path, comb, "`" + comb + "` must be a non-empty array of schemas");
    if (comb == "allOf" && list.size() != 1)
      fail(path, "allOf", "`allOf` with more than one schema is not supported");
    std::vector<Sequence> alts;
    for (size_t i = 0; i < list.size(); ++i)
      alts.push_back({compile(list[i], path + "/" + comb + "/" + std::to_string(i), depth + 1)});
    return g_.alternatives(comb, std::move(alts));
  }

  Element literal_json(const json& v) { return g_.literal(v.dump(-1, ' ', false)); }

  Element enumeration(const json& s, const std::string& path) {
    const json& e = s["enum"];
    if (!e.is_array() || e.empty()) fail(path, "enum", "`enum` must be a non-empty array");
    if (e.size() > 4096) fail(path, "enum", "`enum` has more than 4096 values");
    std::vector<Sequence> alts;
    for (const auto& v : e) alts.push_back({literal_json(v)});
    return g_.alternatives("enum", std::move(alts));
  }

  static std::optional<int64_t> int_keyword(const json& s, const char* k, const std::string& path) {
    if (!s.contains(k)) return std::nullopt;
    if (!s[k].is_number()) fail(path, k, std::string("`") + k + "` must be a number");
    const double v = s[k].get<double>();
    if (!std::isfinite(v) || std::fabs(v) > 9e15) fail(path, k, std::string("`") + k + "` is out of range");
    return int64_t(std::floor(v)) == v ? std::optional<int64_t>(int64_t(v)) : std::nullopt;
  }

  static double number_keyword(const json& s, const char* k, const std::string& path) {
    if (!s[k].is_number()) fail(path, k, std::string("`") + k + "` must be a number");
    const double v = s[k].get<double>();
    if (!std::isfinite(v) || std::fabs(v) > 9e15) fail(path, k, std::string("`") + k + "` is out of range");
    return v;
  }

  Element typed(const json& s, const std::string& t, const std::string& path, int depth) {
    if (t == "string") return string(s, path);
    if (t == "integer") {
      std::optional<int64_t> lo, hi;
      if (s.contains("minimum")) lo = int64_t(std::ceil(number_keyword(s, "minimum", path)));
      if (s.contains("exclusiveMinimum")) {
        if (s["exclusiveMinimum"].is_boolean()) fail(path, "exclusiveMinimum", "boolean `exclusiveMinimum` (draft 4) is not supported; use a number");
        const int64_t v = int64_t(std::floor(number_keyword(s, "exclusiveMinimum", path))) + 1;
        lo = lo ? std::max(*lo, v) : v;
      }
      if (s.contains("maximum")) hi = int64_t(std::floor(number_keyword(s, "maximum", path)));
      if (s.contains("exclusiveMaximum")) {
        if (s["exclusiveMaximum"].is_boolean()) fail(path, "exclusiveMaximum", "boolean `exclusiveMaximum` (draft 4) is not supported; use a number");
        const int64_t v = int64_t(std::ceil(number_keyword(s, "exclusiveMaximum", path))) - 1;
        hi = hi ? std::min(*hi, v) : v;
      }
      if (lo && hi && *lo > *hi) fail(path, "minimum", "no integer satisfies the minimum/maximum bounds");
      return lo || hi ? p_.integer_range(lo, hi) : p_.integer();
    }
    if (t == "number") {
      std::optional<int64_t> lo, hi;
      bool lo_ex = false, hi_ex = false;
      for (const char* k : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
        if (!s.contains(k)) continue;
        if (s[k].is_boolean()) fail(path, k, std::string("boolean `") + k + "` (draft 4) is not supported; use a number");
        number_keyword(s, k, path);
        auto v = int_keyword(s, k, path);
        if (!v) fail(path, k, std::string("a non-integer `") + k + "` on a number is not supported");
        const bool ex = k[0] == 'e';
        const bool is_lo = std::string(k).find("inimum") != std::string::npos;
        auto& bound = is_lo ? lo : hi;
        bool& excl = is_lo ? lo_ex : hi_ex;
        const bool tighter = !bound || (is_lo ? *v > *bound : *v < *bound) || (*v == *bound && ex);
        if (tighter) {
          bound = v;
          excl = ex;
        }
      }
      return lo || hi ? p_.number_range(lo, lo_ex, hi, hi_ex) : p_.number();
    }
    if (t == "boolean") return g_.alternatives("bool", {{g_.literal("true")}, {g_.literal("false")}});
    if (t == "null") return g_.literal("null");
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    fail(path, "type", "unknown type '" + t + "'");
  }

  static int64_t count_keyword(const json& s, const char* k, const std::string& path, int64_t fallback) {
    if (!s.contains(k)) return fallback;
    if (!s[k].is_number_integer() && !s[k].is_number_unsigned())
      fail(path, k, std::string("`") + k + "` must be a non-negative integer");
    const int64_t v = s[k].get<int64_t>();
    if (v < 0) fail(path, k, std::string("`") + k + "` must be a non-negative integer");
    if (v > 10000) fail(path, k, std::string("`") + k + "` larger than 10000 is not supported");
    return v;
  }

  Element string(const json& s, const std::string& path) {
    const int64_t min_len = count_keyword(s, "minLength", path, 0);
    const int64_t max_len = count_keyword(s, "maxLength", path, -1);
    if (max_len >= 0 && max_len < min_len) fail(path, "maxLength", "`maxLength` is below `minLength`");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    std::optional<std::string> regex;
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail(path, "pattern", "`pattern` must be a string");
      regex = s["pattern"].get<std::string>();
      // JSON Schema patterns search; generating a full match of the pattern is always valid.
      if (regex->size() >= 2 && regex->substr(0, 2) == ".*") regex = regex->substr(2);
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) fail(path, "format", "`format` must be a string");
      auto it = kFormats.find(s["format"].get<std::string>());
      const std::string fmt = s["format"].get<std::string>();
      if (it != kFormats.end() || fmt == "date-time") {
        if (regex) fail(path, "format", "`format` together with `pattern` is not supported");
        regex = fmt == "date-time" ? kFormats.at("date") + "T" + kFormats.at("time") : it->second;
      }
    }
    if (regex) {
      if (lengths) fail(path, "pattern", "`pattern` or `format` together with minLength/maxLength is not supported");
      RegexOptions ro;
      ro.json_string = true;
      const Element q = g_.bytes(single_byte('"'));
      Element body;
      try {
        body = regex_to_grammar(g_, *regex, ro);
      } catch (const GrammarError& e) {
        fail(path, "pattern", e.what());
      }
      return g_.alternatives("pattern", {{q, body, q}});
    }
    return p_.string(min_len, max_len);
  }

  Element object(const json& s, const std::string& path, int depth) {
    struct Prop {
      std::string name;
      const json* schema;
      bool required;
    };
    static const json kAny = true;
    std::vector<Prop> props;
    std::set<std::string> required;
    std::vector<std::string> required_order;  // as the schema lists them
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "required", "`required` must be an array of strings");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) fail(path, "required", "`required` must be an array of strings");
        if (required.insert(r.get<std::string>()).second) required_order.push_back(r.get<std::string>());
      }
    }
    std::set<std::string> declared;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) fail(path, "properties", "`properties` must be an object");
      for (const auto& [k, v] : s["properties"].items()) {
        props.push_back({k, &v, required.count(k) > 0});
        declared.insert(k);
      }
    }
    for (const auto& r : required_order)
      if (!declared.count(r)) props.push_back({r, &kAny, true});
    const json* additional = nullptr;
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (!a.is_boolean() && !a.is_object()) fail(path, "additionalProperties", "`additionalProperties` must be a boolean or a schema");
      if (!(a.is_boolean() && !a.get<bool>())) additional = &a;
    } else if (props.empty()) {
      return p_.object();  // {"type": "object"}: any object
    }
    const Element w = p_.ws();
    const Element comma = g_.bytes(single_byte(','));
    auto member = [&](const std::string& key_json, const Element& value) {
      Sequence seq;
      g_.append_literal(seq, key_json);
      seq.push_back(w);
      seq.push_back(g_.bytes(single_byte(':')));
      seq.push_back(w);
      seq.push_back(value);
      seq.push_back(w);
      return g_.alternatives("member", {std::move(seq)});
    };
    // The tail after the listed properties: additional members, if allowed.
    Element first_tail = g_.alternatives("empty", {{}});
    Element after_tail = first_tail;
    if (additional) {
      const Element value = additional->is_boolean() ? p_.value() : compile(*additional, path + "/additionalProperties", depth + 1);
      const Element extra = g_.alternatives(
          "extra", {{p_.string(), w, g_.bytes(single_byte(':')), w, value, w}});
      after_tail = g_.star(g_.alternatives("more", {{comma, w, extra}}));
      first_tail = g_.optional(g_.alternatives("extras", {{extra, after_tail}}));
    }
    // first_i: nothing written yet; after_i: something written (next member needs a comma).
    Element first = first_tail, after = after_tail;
    for (size_t i = props.size(); i-- > 0;) {
      const Prop& p = props[i];
      const Element m = member(json(p.name).dump(-1, ' ', false),
                               compile(*p.schema, path + "/properties/" + p.name, depth + 1));
      std::vector<Sequence> f{{m, after}}, a{{comma, w, m, after}};
      if (!p.required) {
        f.push_back({first});
        a.push_back({after});
      }
      first = g_.alternatives("props", std::move(f));
      after = g_.alternatives("props", std::move(a));
    }
    return g_.alternatives("object", {{g_.bytes(single_byte('{')), w, first, g_.bytes(single_byte('}'))}});
  }

  Element array(const json& s, const std::string& path, int depth) {
    int64_t min_items = count_keyword(s, "minItems", path, 0);
    const int64_t max_items = count_keyword(s, "maxItems", path, -1);
    if (max_items >= 0 && max_items < min_items) fail(path, "maxItems", "`maxItems` is below `minItems`");
    const Element w = p_.ws();
    const Element comma = g_.bytes(single_byte(','));
    std::vector<Element> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) fail(path, "prefixItems", "`prefixItems` must be an array of schemas");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i)
        prefix.push_back(compile(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i), depth + 1));
      // Every prefix item is written (a shorter array would also be valid; this is a subset).
      if (max_items >= 0 && int64_t(prefix.size()) > max_items)
        fail(path, "prefixItems", "`prefixItems` is longer than `maxItems`");
    }
    const json items = s.contains("items") ? s["items"] : json(true);
    const bool no_more = items.is_boolean() && !items.get<bool>();
    if (no_more && min_items > int64_t(prefix.size())) fail(path, "items", "`items: false` with minItems above the prefix");
    Sequence seq{g_.bytes(single_byte('[')), w};
    for (size_t i = 0; i < prefix.size(); ++i) {
      if (i) {
        seq.push_back(comma);
        seq.push_back(w);
      }
      seq.push_back(prefix[i]);
      seq.push_back(w);
    }
    if (!no_more) {
      const Element item_schema = compile(items, path + "/items", depth + 1);
      const int64_t lo = std::max<int64_t>(0, min_items - int64_t(prefix.size()));
      const int64_t hi = max_items < 0 ? -1 : max_items - int64_t(prefix.size());
      if (hi != 0) {
        const Element next = g_.alternatives("next", {{comma, w, item_schema, w}});
        if (!prefix.empty()) {
          seq.push_back(g_.repeat(next, lo, hi));
        } else {
          const Element first = g_.alternatives("first", {{item_schema, w, g_.repeat(next, std::max<int64_t>(lo - 1, 0), hi < 0 ? -1 : hi - 1)}});
          seq.push_back(lo == 0 ? g_.optional(first) : first);
        }
      }
    }
    seq.push_back(g_.bytes(single_byte(']')));
    return g_.alternatives("array", {std::move(seq)});
  }

  Grammar& g_;
  JsonPieces& p_;
  const json& root_;
  std::map<std::string, int32_t> refs_;
};

}  // namespace

Element json_schema_to_grammar(Grammar& g, JsonPieces& pieces, const nlohmann::ordered_json& schema,
                               const nlohmann::ordered_json* root) {
  return SchemaCompiler(g, pieces, root ? *root : schema).compile(schema, "");
}

}  // namespace striker::grammar
