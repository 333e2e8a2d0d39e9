// The workflow commands of `headway` (Argo's REST API, in Headway's one namespace).
// Internal to cli/: commands.cc registers them (see cli/commands.h).
#pragma once

#include <string>

#include "cli/command_support.h"

namespace headway::cli {

bool IsArgoWorkflow(const std::string& text);
int WorkflowList(const Options& o);
int WorkflowSubmit(const Options& o, std::string text = {});
int WorkflowGet(const Options& o);
// suspend, resume, stop, terminate, retry: PUT .../NAME/ACTION.
int WorkflowAct(const Options& o, const std::string& action);
int WorkflowResubmit(const Options& o);
int WorkflowDelete(const Options& o);
// Every step's output, in the order the steps started, each line prefixed
// with the step's name.
int WorkflowLogs(const Options& o);

}  // namespace headway::cli
