// Artifacts as the REST API shows and takes them (docs/api/openapi.yaml).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "core/artifact.h"
#include "core/status.h"

namespace headway::api {

nlohmann::json ArtifactToJson(const Artifact& artifact);
nlohmann::json ArtifactUseToJson(const ArtifactUse& use);

// The body of POST /api/v1/artifacts: {"name", "kind", "size", "digest",
// "content_md5"?, "team"?, "producer"?: {"job", "attempt", "step", "pipeline_node"},
// "metrics"?: {NAME: number | "NaN" | "Infinity" | "-Infinity"}, "labels"?:
// {KEY: string}, "multipart"?: bool}. Unknown fields and wrong types are
// refused by name; the values are checked by ValidateNewArtifact.
// "multipart": the client can drive a multipart upload (*multipart, when
// given, says whether it asked).
Result<Artifact> ParseNewArtifact(std::string_view body, bool* multipart = nullptr);

}  // namespace headway::api
