// The canonical JSON form of a JobSpec. ParseJobSpec reads it back unchanged,
// so it is both the persisted form and what the API shows as "spec".
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "core/job.h"

namespace headway {

nlohmann::json JobSpecToJson(const JobSpec& spec);

// Reads back what JobSpecToJson wrote: the stores' fast path (a listing of
// 100k jobs reads 100k specs; ParseJobSpec's YAML reader took ~100 us each,
// this takes a few). It trusts its input's shape no more than any reader:
// a document that is not exactly that form (a missing or mistyped field, an
// unknown one) gives nullopt, and the caller falls back to ParseJobSpec.
std::optional<JobSpec> JobSpecFromStoredJson(const nlohmann::json& j);

}  // namespace headway
