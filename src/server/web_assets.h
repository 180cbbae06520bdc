// The chat page (src/server/web/), compiled into the binary at build time by
// cmake/embed_web.cmake, so `striker serve` needs no files beside it and the page fetches
// nothing from elsewhere.
#pragma once
#include <string_view>
#include <vector>

namespace striker::server {

struct WebAsset {
  std::string_view route;         // "/" for index.html, "/static/<name>" for the rest
  std::string_view content_type;
  std::string_view bytes;
};

const std::vector<WebAsset>& web_assets();

}  // namespace striker::server
