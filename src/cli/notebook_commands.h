// The notebook commands of `headway` (`notebook start|list|open|stop|...`).
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

int NotebookStart(const Options& o);
int NotebookList(const Options& o);
int NotebookOpen(const Options& o);
int NotebookAct(const Options& o, const std::string& action);

}  // namespace headway::cli
