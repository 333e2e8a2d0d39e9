// The dashboard's files (web/), compiled into the binary so that `headway
// server` serves it with nothing to install beside it.
#pragma once

#include <string_view>
#include <vector>

namespace headway::api {

struct WebAsset {
  std::string_view path;   // relative to web/, e.g. "index.html", "vendor/uPlot.min.css"
  std::string_view bytes;  // static storage
};

// Every file of web/ as it was at build time.
const std::vector<WebAsset>& BuiltInWebAssets();

}  // namespace headway::api
