// The artifact commands of `headway` (`artifacts ls|put|get|describe|lineage|rm`).
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

int ArtifactsList(const Options& o);
int ArtifactsPut(const Options& o);
int ArtifactsGet(const Options& o);
int ArtifactsDescribe(const Options& o, bool lineage_only);
int ArtifactsRemove(const Options& o);

}  // namespace headway::cli
