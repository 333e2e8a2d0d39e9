// The canonical JSON form of a JobSpec. ParseJobSpec reads it back unchanged,
// so it is both the persisted form and what the API shows as "spec".
#pragma once

#include <nlohmann/json.hpp>

#include "core/job.h"

namespace headway {

nlohmann::json JobSpecToJson(const JobSpec& spec);

}  // namespace headway
