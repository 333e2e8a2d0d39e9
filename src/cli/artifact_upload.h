// The client's half of a multipart artifact upload (api/artifact_service.h's
// MultipartPlan): it asks the server which parts the object store holds
// already, sends the others straight to the store with presigned requests,
// several at once, and leaves the commit to its caller. An upload cut off
// (killed, a lost connection) resumes on the next try of the same file:
// parts the store holds with the same size and MD5 are not sent again.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/http_client.h"
#include "core/status.h"

namespace headway::cli {

struct PartsUploaded {
  int parts = 0;   // in the upload
  int reused = 0;  // found in the store already
  int sent = 0;
};

// `version_path`: "/api/v1/artifacts/NAME/versions/N"; `plan`: the
// "multipart" object of the creation's "upload" ({upload_id, part_size,
// part_count}); `size`: the file's, as the version records it; `ca_file`:
// for an https object store. Errors say which part failed and why.
Result<PartsUploaded> UploadParts(api::HttpClient& server, const std::string& version_path,
                                  const std::string& path, std::uint64_t size,
                                  const nlohmann::json& plan, const std::string& ca_file,
                                  int concurrency = 4);

}  // namespace headway::cli
