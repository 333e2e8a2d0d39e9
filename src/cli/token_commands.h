// The token commands of `headway` (`token create|list|revoke`).
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

int TokenCreate(const Options& o);
int TokenList(const Options& o);
int TokenRevoke(const Options& o);

}  // namespace headway::cli
