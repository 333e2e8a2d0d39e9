// Reading Argo manifests (argoproj.io/v1alpha1 Workflow, WorkflowTemplate,
// CronWorkflow) from YAML or JSON text, and checking them as `argo lint`
// does. Pure: text in, model or error out; no I/O. Safe to call from any
// thread.
//
// Errors are InvalidArgument (PayloadTooLarge for a document over
// kMaxManifestBytes) with the field path in Argo's names and the 1-based line
// (Status::field(), Status::line()), e.g.
//   spec.templates[2].dag.tasks[0].template (line 31): no template named 'build'
//
// Strictness follows a Kubernetes API server in strict mode: an unknown
// field under spec is an error naming it (and the closest known name when
// one is close); unknown metadata fields are ignored. Known fields Headway
// does not act on are kept (workflow.h: `recorded`) and listed in
// Manifest::warnings, so the controller can show them as events; fields it
// cannot honour are errors saying why.
//
// Validation (run by ParseManifest; ValidateWorkflowSpec runs it alone):
//   - names: metadata.name a DNS-1123 subdomain of at most 63 characters
//     (52 for a CronWorkflow, which appends a timestamp); template, task,
//     step names alphanumerics and '-', starting alphanumeric, at most 128;
//     parameter and artifact names alphanumerics, '_' and '-'; no duplicates
//   - a Workflow has an entrypoint naming one of its templates (unless it
//     runs a workflowTemplateRef); onExit and every task's or step's
//     template name existing templates; templateRef is left for the
//     controller to resolve against WorkflowTemplates
//   - every template is of exactly one kind
//   - a DAG: task names unique, `dependencies` naming tasks of that DAG,
//     no cycle (the error names it: a -> b -> a), not both `dependencies`
//     and `depends` in one DAG; `depends` and `when` non-empty strings
//     (their grammar is checked where they are evaluated)
//   - at most one of withItems, withParam, withSequence; withSequence has
//     count or end, not both
//   - input parameters and artifacts a template needs (no value, default or
//     source) are supplied: by spec.arguments for a Workflow's entrypoint,
//     by the arguments of each task or step that calls the template
//   - resources quantities (nvidia.com/gpu, cpu, memory) are numbers
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"
#include "workflow/workflow.h"

namespace headway::workflow {

inline constexpr std::size_t kMaxManifestBytes = 4 << 20;
// Templates plus DAG tasks plus steps in one document.
inline constexpr std::size_t kMaxTemplatesAndTasks = 20000;

// A known field that was kept but will not be acted on.
struct Warning {
  std::string field;  // e.g. "spec.volumes"
  int line = 0;       // 1-based; 0 when unknown
  std::string message;
  bool operator==(const Warning&) const = default;
};

// Field path ("spec.templates[0].name") -> 1-based line, for errors found
// after parsing.
using LineMap = std::map<std::string, int>;

struct Manifest {
  std::variant<Workflow, WorkflowTemplate, CronWorkflow> resource;
  std::vector<Warning> warnings;
  // Where each field was: for errors found later (ValidateWorkflowSpec).
  // About one entry per field; drop it when no longer needed.
  LineMap lines;
};

// One document. Several documents ("---") are an error naming how many;
// use ParseManifests for those.
Result<Manifest> ParseManifest(std::string_view text);
// Every document of a multi-document YAML stream, in order; an error in any
// is the result (its field path starts with "documents[i].").
Result<std::vector<Manifest>> ParseManifests(std::string_view text);

enum class SpecOwner { kWorkflow, kWorkflowTemplate };

// The checks above on a spec already in the model (e.g. a Workflow whose
// spec a controller merged from a WorkflowTemplate). `prefix` starts field
// paths ("spec", "spec.workflowSpec"); lines come from `lines` when given.
// A WorkflowTemplate needs no entrypoint, and its arguments may be
// supplied when it is submitted.
Status ValidateWorkflowSpec(const WorkflowSpec& spec, SpecOwner owner, const std::string& prefix,
                            const LineMap* lines = nullptr);

// Argo's name rules.
bool IsValidObjectName(std::string_view name, std::size_t max_length);  // DNS-1123 subdomain
bool IsValidTemplateName(std::string_view name);                        // also tasks and steps
bool IsValidParameterName(std::string_view name);                       // also artifacts

}  // namespace headway::workflow
