// The routes' JSON answers: a body, or a Status as the API's error object
// ({"error": {"code", "message", "field"?, "line"?}}) with its HTTP status.
#pragma once

#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "api/job_json.h"
#include "core/status.h"

namespace headway::api {

inline HttpResponse JsonResponse(int status, const nlohmann::json& body) {
  return {status, "application/json", JsonText(body), {}, nullptr, nullptr};
}

inline HttpResponse ErrorResponse(const Status& status) {
  return JsonResponse(HttpStatusFor(status.code()), ErrorToJson(status));
}

}  // namespace headway::api
