#include "api/artifact_json.h"

#include <cmath>
#include <limits>

#include "core/progress_report.h"
#include "core/time.h"

namespace headway::api {
namespace {

using nlohmann::json;

Status WrongType(const std::string& field, const char* want) {
  return InvalidArgument(std::string("must be ") + want).WithField(field);
}

}  // namespace

json ArtifactToJson(const Artifact& a) {
  json producer = json::object();
  if (!a.producer.job.empty()) producer["job"] = a.producer.job;
  if (a.producer.attempt) producer["attempt"] = *a.producer.attempt;
  if (a.producer.step) producer["step"] = *a.producer.step;
  if (!a.producer.pipeline_node.empty()) producer["pipeline_node"] = a.producer.pipeline_node;
  json metrics = json::object();
  for (const auto& [name, value] : a.metrics) metrics[name] = MetricValueToJson(value);
  return {{"name", a.name},
          {"version", a.version},
          {"ref", a.Ref()},
          {"kind", ArtifactKindName(a.kind)},
          {"state", ArtifactStateName(a.state)},
          {"team", a.team},
          {"created_by", a.created_by},
          {"size", a.size},
          {"digest", a.digest},
          {"producer", producer},
          {"metrics", metrics},
          {"labels", a.labels},
          {"created_at", FormatRfc3339(a.created_at)},
          {"ready_at", a.ready_at ? json(FormatRfc3339(*a.ready_at)) : json(nullptr)}};
}

json ArtifactUseToJson(const ArtifactUse& u) {
  return {{"artifact", u.name + ":" + std::to_string(u.version)},
          {"name", u.name},
          {"version", u.version},
          {"job", u.job},
          {"attempt", u.attempt ? json(*u.attempt) : json(nullptr)},
          {"used_at", FormatRfc3339(u.used_at)}};
}

Result<Artifact> ParseNewArtifact(std::string_view body, bool* multipart) {
  json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return InvalidArgument("body must be a JSON object");
  Artifact a;
  bool has_kind = false, has_size = false;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "name" || key == "digest" || key == "team" || key == "content_md5") {
      if (!v.is_string()) return WrongType(key, "a string");
      (key == "name"     ? a.name
       : key == "digest" ? a.digest
       : key == "team"   ? a.team
                         : a.content_md5) = v.get<std::string>();
    } else if (key == "kind") {
      if (!v.is_string()) return WrongType(key, "a string");
      auto kind = ParseArtifactKind(v.get<std::string>());
      if (!kind)
        return InvalidArgument("must be checkpoint, model, dataset or output").WithField(key);
      a.kind = *kind;
      has_kind = true;
    } else if (key == "size") {
      if (!v.is_number_unsigned()) return WrongType(key, "a whole number of bytes");
      a.size = v.get<std::uint64_t>();
      has_size = true;
    } else if (key == "producer") {
      if (!v.is_object()) return WrongType(key, "an object");
      for (auto p = v.begin(); p != v.end(); ++p) {
        const std::string field = "producer." + p.key();
        if (p.key() == "job" || p.key() == "pipeline_node") {
          if (!p.value().is_string()) return WrongType(field, "a string");
          (p.key() == "job" ? a.producer.job : a.producer.pipeline_node) =
              p.value().get<std::string>();
        } else if (p.key() == "attempt" || p.key() == "step") {
          if (!p.value().is_number_integer()) return WrongType(field, "a whole number");
          if (p.key() == "attempt") {
            std::int64_t n = p.value().get<std::int64_t>();
            if (n < 0 || n > std::numeric_limits<int>::max()) {
              return InvalidArgument("must be >= 0").WithField(field);
            }
            a.producer.attempt = static_cast<int>(n);
          } else {
            a.producer.step = p.value().get<std::int64_t>();
          }
        } else {
          return InvalidArgument("unknown field (known: job, attempt, step, pipeline_node)")
              .WithField(field);
        }
      }
    } else if (key == "metrics") {
      if (!v.is_object()) return WrongType(key, "an object of numbers");
      for (auto m = v.begin(); m != v.end(); ++m) {
        auto value = ParseMetricValue("metrics." + m.key(), m.value());
        if (!value.ok()) return value.status();
        a.metrics[m.key()] = *value;
      }
    } else if (key == "labels") {
      if (!v.is_object()) return WrongType(key, "an object of strings");
      for (auto l = v.begin(); l != v.end(); ++l) {
        if (!l.value().is_string()) return WrongType("labels." + l.key(), "a string");
        a.labels[l.key()] = l.value().get<std::string>();
      }
    } else if (key == "multipart") {
      if (!v.is_boolean()) return WrongType(key, "true or false");
      if (multipart != nullptr) *multipart = v.get<bool>();
    } else {
      return InvalidArgument(
                 "unknown field (known: name, kind, size, digest, content_md5, team, "
                 "producer, metrics, labels, multipart)")
          .WithField(key);
    }
  }
  if (a.name.empty()) return InvalidArgument("is required").WithField("name");
  if (a.digest.empty()) return InvalidArgument("is required").WithField("digest");
  if (!has_kind) return InvalidArgument("is required").WithField("kind");
  if (!has_size) return InvalidArgument("is required").WithField("size");
  HEADWAY_RETURN_IF_ERROR(ValidateNewArtifact(a));
  return a;
}

}  // namespace headway::api
