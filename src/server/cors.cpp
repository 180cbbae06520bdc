#include "server/cors.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace striker::server {
namespace {

constexpr const char* kAllMethods = "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT";
// Headers a browser may always send (the CORS safelist), allowed on top of --allowed-headers.
const std::vector<std::string> kSafelisted = {"accept", "accept-language", "content-language", "content-type"};

bool has(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}
std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}
std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::vector<std::string> CorsPolicy::parse_list(const std::string& json, const std::string& flag) {
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_array()) throw Error(flag + " must be a JSON list of strings, e.g. '[\"*\"]', got " + json);
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string()) throw Error(flag + " must be a JSON list of strings, got " + json);
    out.push_back(v.get<std::string>());
  }
  return out;
}

bool CorsPolicy::answer_preflight(const httplib::Request& req, httplib::Response& res) const {
  if (req.method != "OPTIONS" || !req.has_header("Origin") || !req.has_header("Access-Control-Request-Method"))
    return false;
  const std::string origin = req.get_header_value("Origin");
  const bool all_origins = has(origins, "*"), all_headers = has(headers, "*"), all_methods = has(methods, "*");
  std::vector<std::string> failures;
  if (!all_origins && !has(origins, origin)) failures.push_back("origin");
  if (!all_methods && !has(methods, req.get_header_value("Access-Control-Request-Method"))) failures.push_back("method");
  const std::string requested = req.get_header_value("Access-Control-Request-Headers");
  if (!all_headers && !requested.empty()) {
    size_t from = 0;
    while (from <= requested.size()) {
      const size_t comma = std::min(requested.find(',', from), requested.size());
      const std::string h = lower(trim(requested.substr(from, comma - from)));
      bool ok = h.empty() || has(kSafelisted, h);
      for (const auto& allowed : headers) ok = ok || lower(allowed) == h;
      if (!ok) {
        failures.push_back("headers");
        break;
      }
      from = comma + 1;
    }
  }
  if (all_origins && !credentials) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    if (!has(failures, "origin")) res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  res.set_header("Access-Control-Allow-Methods", all_methods ? std::string(kAllMethods) : joined(methods));
  res.set_header("Access-Control-Max-Age", "600");
  if (credentials) res.set_header("Access-Control-Allow-Credentials", "true");
  if (all_headers) {
    if (!requested.empty()) res.set_header("Access-Control-Allow-Headers", requested);
  } else {
    std::vector<std::string> allowed = kSafelisted;
    for (const auto& h : headers) allowed.push_back(lower(h));
    std::sort(allowed.begin(), allowed.end());
    allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
    res.set_header("Access-Control-Allow-Headers", joined(allowed));
  }
  if (failures.empty()) {
    res.status = 200;
    res.set_content("OK", "text/plain; charset=utf-8");
  } else {
    res.status = 400;
    res.set_content("Disallowed CORS " + joined(failures), "text/plain; charset=utf-8");
  }
  return true;
}

void CorsPolicy::add_headers(const httplib::Request& req, httplib::Response& res) const {
  if (!req.has_header("Origin")) return;
  const std::string origin = req.get_header_value("Origin");
  const bool all_origins = has(origins, "*");
  if (!all_origins && !has(origins, origin)) return;
  // With cookies or credentials the origin is named, never "*" (browsers refuse "*" then).
  if (all_origins && !credentials && !req.has_header("Cookie")) {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (credentials) res.set_header("Access-Control-Allow-Credentials", "true");
}

}  // namespace striker::server
