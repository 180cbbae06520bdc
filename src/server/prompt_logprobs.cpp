#include "server/prompt_logprobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "server/serving_context.h"
#include "tokenizer/tokenizer.h"

namespace striker::server {
namespace {

constexpr const char* kMarkerPrefix = "\x01raw:";

// A logprob as Python's json writes vLLM's float: the double's shortest round-trip digits, always with
// a decimal point or an exponent (-9999.0, not -9999); the -9999 floor as vLLM clamps -inf.
void append_logprob(std::string& out, float v) {
  v = std::max(v, -9999.0f);
  if (std::isnan(v)) {
    out += "null";  // as dump_json writes a NaN (a row with NaN logits)
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, double(v));
  const std::string_view s(buf, size_t(r.ptr - buf));
  out += s;
  if (s.find_first_of(".e") == std::string_view::npos) out += ".0";
}

class EntryWriter {
 public:
  EntryWriter(const Tokenizer& tok, std::string& out) : tok_(tok), out_(out) {}

  void entry(bool first, int32_t id, float logprob, int64_t rank) {
    if (!first) out_ += ',';
    out_ += '"';
    out_ += std::to_string(id);
    out_ += "\":{\"logprob\":";
    append_logprob(out_, logprob);
    out_ += ",\"rank\":";
    out_ += std::to_string(rank);
    out_ += ",\"decoded_token\":";
    out_ += decoded(id);
    out_ += '}';
  }

 private:
  // The token's text as a JSON string (invalid UTF-8 replaced, as dump_json does), once per id.
  const std::string& decoded(int32_t id) {
    auto it = cache_.find(id);
    if (it == cache_.end()) it = cache_.emplace(id, dump_json(nlohmann::json(token_text(tok_, id)))).first;
    return it->second;
  }

  const Tokenizer& tok_;
  std::string& out_;
  std::unordered_map<int32_t, std::string> cache_;
};

}  // namespace

std::string prompt_logprobs_text(const Tokenizer& tok, const std::vector<std::optional<TokenLogprob>>& lps) {
  std::string out;
  size_t entries = 0;
  for (const auto& lp : lps) entries += lp ? lp->top.size() + 1 : 0;
  out.reserve(entries * 64 + lps.size() * 8 + 2);
  EntryWriter w(tok, out);
  out += '[';
  for (size_t i = 0; i < lps.size(); ++i) {
    if (i) out += ',';
    const auto& lp = lps[i];
    if (!lp) {
      out += "null";
      continue;
    }
    // As vLLM's dict: the prompt token first; a top token with the same id updates that entry in place
    // (same logprob and rank), so it is not written twice.
    out += '{';
    w.entry(true, lp->token, lp->logprob, lp->rank);
    int64_t rank = 0;
    for (const auto& [id, logprob] : lp->top) {
      ++rank;
      if (id != lp->token) w.entry(false, id, logprob, rank);
    }
    out += '}';
  }
  out += ']';
  return out;
}

nlohmann::json raw_json_marker(size_t i) { return std::string(kMarkerPrefix) + std::to_string(i) + "\x01"; }

std::string dump_with_raw_values(const nlohmann::json& doc, const std::string& key,
                                 const std::vector<std::string>& texts) {
  const std::string dumped = dump_json(doc);
  // "<key>":"\u0001raw:<i>\u0001" as dump_json writes a marker.
  const std::string prefix = dump_json(nlohmann::json(std::string(kMarkerPrefix)));
  const std::string head = "\"" + key + "\":" + prefix.substr(0, prefix.size() - 1);  // without the closing quote
  size_t total = dumped.size();
  for (const auto& t : texts) total += t.size();
  std::string out;
  out.reserve(total);
  size_t from = 0;
  for (size_t at = dumped.find(head); at != std::string::npos; at = dumped.find(head, from)) {
    const size_t digits = at + head.size();
    size_t index = 0;
    const auto r = std::from_chars(dumped.data() + digits, dumped.data() + dumped.size(), index);
    const std::string_view tail = "\\u0001\"";
    if (r.ec != std::errc() || index >= texts.size() || std::string_view(r.ptr, tail.size()) != tail) {
      throw std::logic_error("dump_with_raw_values: malformed marker for " + key);
    }
    const size_t value = at + key.size() + 3;  // after "<key>":
    out.append(dumped, from, value - from);
    out += texts[index];
    from = size_t(r.ptr - dumped.data()) + tail.size();
  }
  out.append(dumped, from, std::string::npos);
  return out;
}

}  // namespace striker::server
