# cmake -DOUT=file.cpp -DFILES="a|b|c" -P embed_web.cmake
# Writes a C++ file holding each file's bytes, for src/server/web_assets.h: index.html is served
# at "/", every other file at "/static/<name>". Run at build time whenever a file changes.
string(REPLACE "|" ";" FILES "${FILES}")
set(_body "")
set(_table "")
set(_i 0)
foreach(_f ${FILES})
  get_filename_component(_name ${_f} NAME)
  get_filename_component(_ext ${_f} LAST_EXT)
  if(_ext STREQUAL ".html")
    set(_type "text/html; charset=utf-8")
  elseif(_ext STREQUAL ".css")
    set(_type "text/css; charset=utf-8")
  elseif(_ext STREQUAL ".js")
    set(_type "text/javascript; charset=utf-8")
  elseif(_ext STREQUAL ".svg")
    set(_type "image/svg+xml")
  else()
    message(FATAL_ERROR "embed_web.cmake: no content type for ${_f}")
  endif()
  if(_name STREQUAL "index.html")
    set(_route "/")
  else()
    set(_route "/static/${_name}")
  endif()
  file(READ ${_f} _hex HEX)
  string(LENGTH "${_hex}" _len)
  math(EXPR _size "${_len} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" _bytes "${_bytes}")
  string(APPEND _body "// ${_name}\nconst unsigned char k${_i}[] = {\n${_bytes}};\n")
  string(APPEND _table "      {\"${_route}\", \"${_type}\", std::string_view(reinterpret_cast<const char*>(k${_i}), ${_size})},\n")
  math(EXPR _i "${_i} + 1")
endforeach()
file(WRITE ${OUT}.tmp "// Generated at build time by cmake/embed_web.cmake from src/server/web/; do not edit.
#include \"server/web_assets.h\"

namespace striker::server {
namespace {
${_body}}  // namespace

const std::vector<WebAsset>& web_assets() {
  static const std::vector<WebAsset> assets = {
${_table}  };
  return assets;
}

}  // namespace striker::server
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
