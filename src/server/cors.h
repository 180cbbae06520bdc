// Cross-origin requests from browsers, as vLLM answers them (FastAPI's CORSMiddleware with
// --allowed-origins / --allowed-methods / --allowed-headers / --allow-credentials; by default any
// origin, method and header, without credentials): a preflight OPTIONS gets the allowances or a 400
// naming what is disallowed, and every response to a request from an allowed origin carries
// Access-Control-Allow-Origin, so a chat front end served from another origin can call the API.
#pragma once
#include <string>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace striker::server {

struct CorsPolicy {
  std::vector<std::string> origins = {"*"};
  std::vector<std::string> methods = {"*"};
  std::vector<std::string> headers = {"*"};
  bool credentials = false;

  // Parses vLLM's flag values (JSON lists of strings); throws striker::Error naming the flag.
  static std::vector<std::string> parse_list(const std::string& json, const std::string& flag);

  // A preflight (OPTIONS with Origin and Access-Control-Request-Method): answers it in `res` and
  // returns true; false for any other request.
  bool answer_preflight(const httplib::Request& req, httplib::Response& res) const;
  // Adds the response headers for a request from an allowed origin (none without an Origin header).
  void add_headers(const httplib::Request& req, httplib::Response& res) const;
};

}  // namespace striker::server
