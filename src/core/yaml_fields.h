// Helpers for parsing YAML documents field by field, shared by the spec
// parsers (jobs, experiments): every error names the field path and its
// 1-based line, unknown fields and duplicate keys are errors. Internal to
// the parsers; yaml-cpp stays out of the public headers.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"
#include "core/time.h"

namespace headway::yaml_fields {

int LineOf(const YAML::Node& node);
Status FieldError(const std::string& field, const YAML::Node& node, std::string message);
std::string TypeName(const YAML::Node& node);
// A quoted scalar ("1") stays a string even where a number is wanted.
bool IsQuoted(const YAML::Node& node);

Result<std::string> AsString(const std::string& field, const YAML::Node& node);
Result<std::int64_t> AsInt(const std::string& field, const YAML::Node& node, std::int64_t min,
                           std::int64_t max);
// A finite number (integers too).
Result<double> AsDouble(const std::string& field, const YAML::Node& node);
Result<bool> AsBool(const std::string& field, const YAML::Node& node);
Result<std::vector<std::string>> AsStringList(const std::string& field, const YAML::Node& node);
Result<std::map<std::string, std::string>> AsStringMap(const std::string& field,
                                                       const YAML::Node& node);
// A memory size as Kubernetes writes it ("16Gi", "512Mi", "2G", bytes), at least 4 MiB.
Result<std::int64_t> AsMemory(const std::string& field, const YAML::Node& node);
Result<Duration> AsDuration(const std::string& field, const YAML::Node& node);

// Runs `parse`, turning anything yaml-cpp throws into InvalidArgument. The
// parsers check a node's type before converting it; this is the net under
// them, so a malformed document is a 400, never an exception.
template <class T, class Parse>
Result<T> CatchYamlErrors(Parse&& parse) {
  try {
    return parse();
  } catch (const YAML::Exception& e) {
    Status s = InvalidArgument("not a valid spec: " + e.msg);
    s.WithField("spec", e.mark.line >= 0 ? std::optional<int>(e.mark.line + 1) : std::nullopt);
    return s;
  }
}

using FieldHandler = std::function<Status(const std::string& field, const YAML::Node& value)>;

// Walks a map, dispatching each key to its handler; unknown keys are errors.
Status ForEachField(const std::string& prefix, const YAML::Node& map,
                    const std::map<std::string, FieldHandler>& handlers);

template <typename T, typename Parse>
FieldHandler Assign(T& target, Parse parse) {
  return [&target, parse](const std::string& field, const YAML::Node& value) -> Status {
    auto parsed = parse(field, value);
    if (!parsed.ok()) return parsed.status();
    target = std::move(parsed.value());
    return Status::Ok();
  };
}

FieldHandler AssignInt(int& target, std::int64_t min, std::int64_t max);
FieldHandler Ignore();

// Loads a document; InvalidArgument with the line for malformed YAML/JSON.
Result<YAML::Node> Load(std::string_view document);

// Loads every document of a stream ("---" between them), at most
// `max_documents`. yaml-cpp 0.7's LoadAll never returns on some malformed
// streams (its parser keeps yielding empty documents): the documents are
// counted first, and a stream past the limit is refused, never loaded.
Result<std::vector<YAML::Node>> LoadAll(std::string_view text, std::size_t max_documents);

// A job spec from a YAML map. Field paths in errors start with `prefix`
// ("" for a job document, "trial_template" inside an experiment). Without
// `name_required` a missing name is allowed (left empty).
Result<JobSpec> ParseJobSpecNode(const YAML::Node& root, const std::string& prefix,
                                 bool name_required);

// A field a manifest may carry that Headway cannot honour: an error naming
// it, its line, and why.
Status UnsupportedField(const std::string& field, const YAML::Node& node, const std::string& why);

// Adds handlers that ignore the metadata a Kubernetes API server writes
// (uid, resourceVersion, generation, creationTimestamp, managedFields):
// harmless in an exported manifest.
void IgnoreServerWrittenMetadata(std::map<std::string, FieldHandler>& handlers);

// A generateName prefix: with 5 random characters appended it must be a job name.
Status CheckGenerateName(const std::string& field, const YAML::Node& node,
                         const std::string& prefix);

// A job's pull-mode progress endpoint: {port, path, interval}.
Result<ProgressEndpoint> AsProgressEndpoint(const std::string& field, const YAML::Node& node);

// Whether `root` is a Kubernetes manifest whose apiVersion starts with
// `group` (e.g. "trainer.kubeflow.org/") and whose kind is `kind`.
bool IsManifestOf(const YAML::Node& root, std::string_view group, std::string_view kind);

// A Kubernetes container (name, image, command, args, workingDir, env,
// resources) applied to `spec`; other container fields are refused by name.
Status ApplyKubernetesContainer(const YAML::Node& container, const std::string& field,
                                JobSpec& spec);

// A Kubeflow TrainJob manifest as a job spec (core/kubeflow_manifest.h).
// Without `name_required` the metadata may be absent (a trial template).
Result<JobSpec> ParseTrainJobNode(const YAML::Node& root, const std::string& prefix,
                                  bool name_required);

}  // namespace headway::yaml_fields
