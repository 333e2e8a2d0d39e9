# Script mode: writes a C++ source that holds the bytes of FILES (paths
# relative to BASE_DIR, '|'-separated: a ';' would not survive the command
# line) for api/web_assets.h.
#   cmake -DBASE_DIR=... -DFILES=a.js|b.css -DOUTPUT=... -P embed_files.cmake
string(REPLACE "|" ";" FILES "${FILES}")
set(body "")
set(table "")
set(index 0)
foreach(rel IN LISTS FILES)
  file(READ "${BASE_DIR}/${rel}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  if(hex_length EQUAL 0)
    continue()
  endif()
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "const unsigned char kAsset${index}[] = {${bytes}};\n")
  string(APPEND table "      {\"${rel}\", {reinterpret_cast<const char*>(kAsset${index}), sizeof kAsset${index}}},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp"
"// Generated from web/ by cmake/embed_files.cmake; do not edit.
#include \"api/web_assets.h\"

namespace headway::api {
namespace {
${body}}  // namespace

const std::vector<WebAsset>& BuiltInWebAssets() {
  static const std::vector<WebAsset> assets = {
${table}  };
  return assets;
}

}  // namespace headway::api
")
# Only touch the output when it changed, so an unchanged web/ rebuilds nothing.
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
file(REMOVE "${OUTPUT}.tmp")
