// What the manifest files share: manifest.cc, manifest_templates.cc and
// manifest_fields.cc (parsing) and manifest_validation.cc (checks).
// Internal to the workflow module.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/yaml_fields.h"
#include "workflow/manifest.h"
#include "workflow/workflow.h"

namespace headway::workflow::internal {

// "path[i]": the field of a list's item, as errors name it.
inline std::string Index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

// Headway's keys in labels or annotations that must be numbers or names:
// the field (relative to the metadata) and what is wrong, or nullopt.
std::optional<std::pair<std::string, std::string>> BadHeadwayKey(
    const std::map<std::string, std::string>& labels,
    const std::map<std::string, std::string>& annotations);

// ---- the parse of a manifest ------------------------------------------------
// Shared by manifest_fields.cc (the readers of YAML fields), manifest_templates.cc
// (templates and what they hold) and manifest.cc (documents, specs, metadata).

using yaml_fields::FieldError;
using yaml_fields::LineOf;
using yaml_fields::TypeName;

// Nodes visited in one document, aliases counted each time they are used:
// bounds the work a small document of nested aliases can ask for.
inline constexpr std::size_t kMaxNodeVisits = 2'000'000;

// State of one document's parse: what it warned about, where each field is,
// and the budgets.
struct Context {
  std::vector<Warning> warnings;
  LineMap lines;
  std::size_t templates_and_tasks = 0;
  std::size_t node_visits = 0;

  void Mark(const std::string& path, const YAML::Node& node) { lines.emplace(path, LineOf(node)); }

  Status Visit(const std::string& path, const YAML::Node& node) {
    if (++node_visits > kMaxNodeVisits) {
      return FieldError(path, node, "the document is too large once YAML aliases are expanded");
    }
    return Status::Ok();
  }

  Status CountTemplateOrTask(const std::string& path, const YAML::Node& node) {
    if (++templates_and_tasks > kMaxTemplatesAndTasks) {
      return FieldError(path, node,
                        "more than " + std::to_string(kMaxTemplatesAndTasks) +
                            " templates, tasks and steps in one manifest");
    }
    return Status::Ok();
  }
};

using Handler = std::function<Status(const std::string& path, const YAML::Node& value)>;

// What a map may hold: fields parsed into the model, known fields kept as
// they are with a warning (`ignored`: name -> why), and known fields that
// are errors unless empty or false (`refused`: name -> why).
struct FieldRules {
  std::map<std::string, Handler> parse;
  std::map<std::string, std::string> ignored;
  std::map<std::string, std::string> refused;
};

// ---- defined in manifest_fields.cc

// A YAML value as JSON: plain scalars that read as numbers, booleans or
// null become those; quoted ones stay strings.
Result<nlohmann::json> ToJsonValue(Context& ctx, const std::string& path, const YAML::Node& node,
                                   int depth);

// Walks a map (null counts as empty), dispatching each field by `rules`.
// Ignored fields go into `recorded` with a warning.
Status WalkFields(Context& ctx, const std::string& path, const YAML::Node& map,
                  const FieldRules& rules, RecordedFields* recorded = nullptr);

// Argo's AnyString: a string, or a number or boolean kept as its text.
Result<std::string> AsText(const std::string& path, const YAML::Node& node);
Handler Text(std::string& out);
// A field that, when present, must say something: `when`, `depends`.
Handler NonEmptyText(std::string& out);
Handler OptionalText(std::optional<std::string>& out);

template <typename Int>
Handler Integer(std::optional<Int>& out, std::int64_t min, std::int64_t max) {
  return [&out, min, max](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    auto value = yaml_fields::AsInt(path, node, min, max);
    if (!value.ok()) return value.status();
    out = static_cast<Int>(*value);
    return Status::Ok();
  };
}

Handler Bool(bool& out);
Handler OptionalBool(std::optional<bool>& out);
// Kubernetes' IntOrString: a number stays a number when written back.
Handler IntOrStr(std::optional<IntOrString>& out);

// A list (null counts as empty): each item parsed by `item` into `out`.
template <typename T, typename ParseItem>
Status ParseList(Context& ctx, const std::string& path, const YAML::Node& node, std::vector<T>& out,
                 ParseItem item) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
  if (node.IsNull()) return Status::Ok();
  if (!node.IsSequence()) return FieldError(path, node, "must be a list, got " + TypeName(node));
  for (std::size_t i = 0; i < node.size(); ++i) {
    std::string item_path = Index(path, i);
    ctx.Mark(item_path, node[i]);
    T value{};
    HEADWAY_RETURN_IF_ERROR(item(item_path, node[i], value));
    out.push_back(std::move(value));
  }
  return Status::Ok();
}

Handler TextList(Context& ctx, std::vector<std::string>& out);
Handler TextMap(Context& ctx, std::map<std::string, std::string>& out);

// ---- defined in manifest_templates.cc

Handler Io(Context& ctx, ParametersAndArtifacts& io);
// hooks (LifecycleHooks): kept as written in `recorded`; the exit hook is
// also parsed to be run, the others are reported as not run.
Handler Hooks(Context& ctx, std::optional<LifecycleHook>& exit, RecordedFields& recorded);
Status ParseRetryStrategy(Context& ctx, const std::string& path, const YAML::Node& node,
                          RetryStrategy& r);
Status ParseTemplate(Context& ctx, const std::string& path, const YAML::Node& node, Template& t);

// Fields of a template or spec that hold a duration or a count, typed as
// Argo types them.
template <typename Optional>
Handler Optionally(Context& ctx, Optional& out,
                   Status (*parse)(Context&, const std::string&, const YAML::Node&,
                                   typename Optional::value_type&)) {
  return [&ctx, &out, parse](const std::string& p, const YAML::Node& n) -> Status {
    typename Optional::value_type value{};
    HEADWAY_RETURN_IF_ERROR(parse(ctx, p, n, value));
    out = std::move(value);
    return Status::Ok();
  };
}

}  // namespace headway::workflow::internal
