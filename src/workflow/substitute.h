// Argo template variable substitution: `{{inputs.parameters.x}}`,
// `{{tasks.A.outputs.result}}`, `{{item}}`, `{{=asInt(inputs.parameters.n) + 1}}`
// ... in any string of a workflow, following Argo's util/template package.
//
// A Scope maps a variable name to its value; every value is a string, as in
// Argo (maps and lists arrive as JSON text). Argo fills scopes in phases:
// global variables (workflow.*) when the workflow starts, inputs.* when a
// template is entered, tasks.X.* / steps.X.* as siblings finish, item.* when a
// loop expands, pod.name / retries / node.name when a node is created. An
// early phase substitutes with Unresolved::kKeep so that later phases still
// see their `{{...}}`; the last one uses Unresolved::kError.
//
// The helpers below build the scope entries Argo defines (docs/variables.md)
// from plain values; names a controller sets directly: `pod.name`,
// `node.name`, `retries`, `steps.name`, `tasks.name`, `workflow.status`,
// `workflow.failures`, `workflow.duration`, `workflow.outputs.parameters.X`.
//
// Pure functions, thread-safe, no clocks: times are passed in.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "workflow/expression.h"

namespace headway::workflow {

using Scope = ExprVars;  // variable name -> value

enum class Unresolved {
  kError,  // a tag whose variable is not in the scope is an error naming it
  kKeep,   // such a tag is left as written, for a later phase
};

// Replaces every `{{...}}` tag in `text` (Argo util/template Replace):
//  * a simple tag `{{ name }}` is looked up with surrounding white-space
//    trimmed; its value is inserted as is (no escaping: `text` is a plain
//    string here, not Argo's JSON encoding of it);
//  * `{{=BODY}}` is an expression tag evaluated by EvaluateExprTag over the
//    scope; with kKeep a failing expression is left as written (as Argo
//    does), with kError its error is returned;
//  * Argo's nested-tag rule: in `{{a{{b}}` (tag `a{{b`) where `b` resolves,
//    the output is `{{a` followed by b's value.
// Errors (InvalidArgument): a `{{` without a closing `}}` (whatever the
// mode); with kError, the first unresolved tag: "failed to resolve
// {{inputs.parameters.x}} at position 12".
Result<std::string> Substitute(std::string_view text, const Scope& scope, Unresolved mode);

// Substitute over every string of a JSON document, object keys included (Argo
// substitutes the whole JSON text of a template). Numbers, booleans and null
// are left alone. The error names the path of the failing string
// ("container.args[1]").
Result<nlohmann::json> SubstituteJson(const nlohmann::json& doc, const Scope& scope,
                                      Unresolved mode);

// A step's or task's `when`, the way Argo decides it: substitute the scope
// (strictly: an unresolved variable is an error naming it; `{{=...}}` tags
// are evaluated first, so `{{=inputs.parameters['x'] == 'y'}}` works), then
// evaluate the text with EvaluateWhen. An empty `when` is true.
Result<bool> ShouldExecute(std::string_view when, const Scope& scope);

// One `{{...}}` tag as written.
struct TemplateTag {
  std::string name;  // trimmed variable name, or the body after '=' of an expression tag
  bool expression = false;
  size_t position = 0;  // offset of the opening "{{"
};
// The tags of `text`, in order, for validators (which variables a template
// uses). InvalidArgument for an unclosed `{{`.
Result<std::vector<TemplateTag>> FindTags(std::string_view text);

// ---------------------------------------------------------------------------
// Scope builders (Argo docs/variables.md)
// ---------------------------------------------------------------------------

struct WorkflowMeta {
  std::string name;
  std::string namespace_;
  std::string uid;
  std::string service_account_name;
  std::string main_entrypoint;
  int64_t creation_unix_seconds = 0;  // metadata.creationTimestamp, UTC
  std::optional<int> priority;
  // spec.arguments.parameters in order: name -> value.
  std::vector<std::pair<std::string, std::string>> parameters;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
};

// workflow.name, .namespace, .uid, .serviceAccountName, .mainEntrypoint,
// .priority, .parameters.<NAME>, .parameters and .parameters.json (a JSON
// array of {"name","value"}), .labels.<NAME>, .labels.json,
// .annotations.<NAME>, .annotations.json, .creationTimestamp (RFC 3339,
// "2018-08-23T05:42:49Z"), .creationTimestamp.RFC3339 and
// .creationTimestamp.<C> for the strftime characters Argo defines
// (B b m A a d H I M S Y y p Z z L, in UTC: Z is "UTC", z "+0000", L ".000")
// and .creationTimestamp.s (Unix seconds).
void AddWorkflowVariables(const WorkflowMeta& meta, Scope* scope);

// inputs.parameters.<NAME>, inputs.parameters (JSON array of
// {"name","value"}), inputs.artifacts.<NAME>.path.
void AddInputVariables(const std::vector<std::pair<std::string, std::string>>& parameters,
                       const std::map<std::string, std::string>& artifact_paths, Scope* scope);

// What a finished node exposes to the steps or tasks after it.
struct NodeOutputs {
  std::string id;
  std::string phase;                     // "Succeeded", "Failed", ...
  std::optional<std::string> result;     // outputs.result (stdout of a script/container)
  std::optional<std::string> exit_code;  // outputs.exitCode
  std::string started_at;                // RFC 3339
  std::string finished_at;
  std::string host_node_name;
  std::string ip;                                               // daemon steps
  std::vector<std::pair<std::string, std::string>> parameters;  // outputs.parameters
  std::map<std::string, std::string> artifact_paths;            // outputs.artifacts.<NAME>.path
};

// PREFIX.id, .status, .exitCode, .startedAt, .finishedAt, .hostNodeName, .ip,
// .outputs.result, .outputs.exitCode, .outputs.parameters.<NAME>,
// .outputs.artifacts.<NAME>.path, where PREFIX is "tasks.A" or "steps.A"
// (Argo buildLocalScope).
void AddNodeVariables(std::string_view prefix, const NodeOutputs& node, Scope* scope);

// For a fanned-out step or task (withItems/withParam/withSequence): from the
// children that Succeeded, in the order they started (Argo
// processAggregateNodeOutputs): PREFIX.outputs.result (JSON array of the
// results, each read as JSON when it parses as JSON, otherwise as a string),
// PREFIX.outputs.parameters (JSON array of {name: value} maps) and
// PREFIX.outputs.parameters.<NAME> (JSON array of that parameter's values:
// those that parse as JSON, parsed, when any does; else all, as strings).
void AddAggregateVariables(std::string_view prefix, const std::vector<NodeOutputs>& children,
                           Scope* scope);

// RFC 3339 in UTC with a 'Z' suffix, as Kubernetes prints timestamps.
std::string FormatRfc3339(int64_t unix_seconds);

}  // namespace headway::workflow
