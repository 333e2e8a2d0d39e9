#include "workflow/manifest.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>

#include "core/yaml_fields.h"
#include "workflow/manifest_internal.h"

namespace headway::workflow {
namespace {

// Documents in one stream (ParseManifests).
constexpr std::size_t kMaxDocuments = 1000;

using nlohmann::json;
using yaml_fields::FieldError;
using yaml_fields::IsQuoted;
using yaml_fields::LineOf;
using yaml_fields::TypeName;
using internal::BadHeadwayKey;
using internal::Index;

// Nodes visited in one document, aliases counted each time they are used:
// bounds the work a small document of nested aliases can ask for.
constexpr std::size_t kMaxNodeVisits = 2'000'000;
constexpr int kMaxOpaqueDepth = 64;
constexpr std::size_t kMaxWorkflowName = 63;
constexpr std::size_t kMaxCronWorkflowName = 52;  // Argo appends "-<unix time>"
constexpr std::size_t kGenerateNameSuffix = 5;
constexpr std::size_t kMaxFieldNameLength = 128;


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

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known field closest to `key`, when it is close enough to be a typo.
std::string ClosestField(const std::string& key, const FieldRules& rules) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 3) + 1;
  auto consider = [&](const std::string& name) {
    std::size_t d = EditDistance(key, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  };
  for (const auto& [name, unused] : rules.parse) consider(name);
  for (const auto& [name, unused] : rules.ignored) consider(name);
  for (const auto& [name, unused] : rules.refused) consider(name);
  return best;
}

bool IsEmptyOrFalse(const YAML::Node& node) {
  if (node.IsNull()) return true;
  if (node.IsSequence() || node.IsMap()) return node.size() == 0;
  return node.IsScalar() && !IsQuoted(node) && node.Scalar() == "false";
}

// A YAML value as JSON: plain scalars that read as numbers, booleans or
// null become those; quoted ones stay strings.
Result<json> ToJsonValue(Context& ctx, const std::string& path, const YAML::Node& node, int depth) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
  if (depth > kMaxOpaqueDepth) return FieldError(path, node, "is nested too deeply");
  if (node.IsMap()) {
    json out = json::object();
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return FieldError(path, kv.first, "keys must be strings");
      auto value = ToJsonValue(ctx, path + "." + kv.first.Scalar(), kv.second, depth + 1);
      if (!value.ok()) return value.status();
      out[kv.first.Scalar()] = std::move(*value);
    }
    return out;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (std::size_t i = 0; i < node.size(); ++i) {
      auto value = ToJsonValue(ctx, Index(path, i), node[i], depth + 1);
      if (!value.ok()) return value.status();
      out.push_back(std::move(*value));
    }
    return out;
  }
  if (!node.IsScalar()) return json(nullptr);
  const std::string& text = node.Scalar();
  if (IsQuoted(node)) return json(text);
  if (text == "true" || text == "false") return json(text == "true");
  if (text == "null" || text == "~") return json(nullptr);
  std::int64_t integer = 0;
  auto [iend, iec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (iec == std::errc() && iend == text.data() + text.size()) return json(integer);
  double real = 0;
  auto [dend, dec] = std::from_chars(text.data(), text.data() + text.size(), real);
  if (dec == std::errc() && dend == text.data() + text.size() && std::isfinite(real))
    return json(real);
  return json(text);
}

// Walks a map (null counts as empty), dispatching each field by `rules`.
// Ignored fields go into `recorded` with a warning.
Status WalkFields(Context& ctx, const std::string& path, const YAML::Node& map,
                  const FieldRules& rules, RecordedFields* recorded = nullptr) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, map));
  if (map.IsNull()) return Status::Ok();
  if (!map.IsMap()) return FieldError(path, map, "must be a map, got " + TypeName(map));
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(path, kv.first, "field names must be strings");
    const std::string& key = kv.first.Scalar();
    std::string field = path.empty() ? key : path + "." + key;
    if (!seen.insert(key).second) return FieldError(field, kv.first, "is given twice");
    ctx.Mark(field, kv.first);
    if (auto it = rules.parse.find(key); it != rules.parse.end()) {
      HEADWAY_RETURN_IF_ERROR(it->second(field, kv.second));
    } else if (auto ig = rules.ignored.find(key); ig != rules.ignored.end()) {
      if (recorded) {
        auto value = ToJsonValue(ctx, field, kv.second, 0);
        if (!value.ok()) return value.status();
        (*recorded)[key] = std::move(*value);
      }
      ctx.warnings.push_back({field, LineOf(kv.first), "ignored: " + ig->second});
    } else if (auto rf = rules.refused.find(key); rf != rules.refused.end()) {
      if (!IsEmptyOrFalse(kv.second)) {
        return FieldError(field, kv.first, "is not supported by Headway: " + rf->second);
      }
    } else {
      std::string hint = ClosestField(key, rules);
      return FieldError(field, kv.first,
                        "unknown field" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    }
  }
  return Status::Ok();
}

// ---- scalars ---------------------------------------------------------------

// Argo's AnyString: a string, or a number or boolean kept as its text.
Result<std::string> AsText(const std::string& path, const YAML::Node& node) {
  if (!node.IsScalar()) {
    return FieldError(path, node, "must be a string, number or boolean, got " + TypeName(node));
  }
  return node.Scalar();
}

Handler Text(std::string& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    out = std::move(*text);
    return Status::Ok();
  };
}

// A field that, when present, must say something: `when`, `depends`.
Handler NonEmptyText(std::string& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    if (text->find_first_not_of(" \t\r\n") == std::string::npos) {
      return FieldError(path, node, "must be a non-empty expression");
    }
    out = std::move(*text);
    return Status::Ok();
  };
}

Handler OptionalText(std::optional<std::string>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    auto text = AsText(path, node);
    if (!text.ok()) return text.status();
    out = std::move(*text);
    return Status::Ok();
  };
}

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

Handler Bool(bool& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    auto value = yaml_fields::AsBool(path, node);
    if (!value.ok()) return value.status();
    out = *value;
    return Status::Ok();
  };
}

Handler OptionalBool(std::optional<bool>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    auto value = yaml_fields::AsBool(path, node);
    if (!value.ok()) return value.status();
    out = *value;
    return Status::Ok();
  };
}

// Kubernetes' IntOrString: a number stays a number when written back.
Handler IntOrStr(std::optional<IntOrString>& out) {
  return [&out](const std::string& path, const YAML::Node& node) -> Status {
    if (node.IsNull()) return Status::Ok();
    if (!node.IsScalar())
      return FieldError(path, node, "must be an integer or a string, got " + TypeName(node));
    const std::string& text = node.Scalar();
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    bool is_int = !IsQuoted(node) && ec == std::errc() && end == text.data() + text.size();
    if (!IsQuoted(node) && !is_int && text.find("{{") == std::string::npos) {
      return FieldError(path, node, "must be an integer or a quoted string, got '" + text + "'");
    }
    // A number is kept in its plain decimal form ("09" is 9), as it is
    // written back.
    out = IntOrString{is_int ? std::to_string(value) : text, is_int};
    return Status::Ok();
  };
}

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

Handler TextList(Context& ctx, std::vector<std::string>& out) {
  return [&ctx, &out](const std::string& path, const YAML::Node& node) -> Status {
    return ParseList(ctx, path, node, out,
                     [](const std::string& p, const YAML::Node& n, std::string& v) -> Status {
                       auto text = AsText(p, n);
                       if (!text.ok()) return text.status();
                       v = std::move(*text);
                       return Status::Ok();
                     });
  };
}

Handler TextMap(Context& ctx, std::map<std::string, std::string>& out) {
  return [&ctx, &out](const std::string& path, const YAML::Node& node) -> Status {
    HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
    if (node.IsNull()) return Status::Ok();
    if (!node.IsMap()) return FieldError(path, node, "must be a map, got " + TypeName(node));
    for (const auto& kv : node) {
      if (!kv.first.IsScalar()) return FieldError(path, kv.first, "keys must be strings");
      std::string field = path + "." + kv.first.Scalar();
      ctx.Mark(field, kv.first);
      if (out.count(kv.first.Scalar())) return FieldError(field, kv.first, "is given twice");
      auto value = AsText(field, kv.second);
      if (!value.ok()) return value.status();
      out[kv.first.Scalar()] = std::move(*value);
    }
    return Status::Ok();
  };
}

// ---- inputs, outputs, arguments --------------------------------------------

Status ParseValueFrom(Context& ctx, const std::string& path, const YAML::Node& node, ValueFrom& v) {
  FieldRules rules;
  rules.parse = {{"path", Text(v.path)},
                 {"jsonPath", Text(v.json_path)},
                 {"jqFilter", Text(v.jq_filter)},
                 {"event", Text(v.event)},
                 {"parameter", Text(v.parameter)},
                 {"expression", Text(v.expression)},
                 {"default", OptionalText(v.default_value)},
                 {"supplied",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    if (!n.IsNull() && !n.IsMap()) return FieldError(p, n, "must be a map ({})");
                    v.supplied = true;
                    return Status::Ok();
                  }},
                 {"configMapKeyRef", [&](const std::string& p, const YAML::Node& n) -> Status {
                    ConfigMapKeyRef ref;
                    FieldRules r;
                    r.parse = {{"name", Text(ref.name)},
                               {"key", Text(ref.key)},
                               {"optional", OptionalBool(ref.optional)}};
                    HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
                    v.config_map_key_ref = std::move(ref);
                    ctx.warnings.push_back(
                        {p, LineOf(n), "ConfigMaps do not exist in Headway: the default is used"});
                    return Status::Ok();
                  }}};
  return WalkFields(ctx, path, node, rules);
}

Status ParseParameter(Context& ctx, const std::string& path, const YAML::Node& node, Parameter& p) {
  FieldRules rules;
  rules.parse = {{"name", Text(p.name)},
                 {"value", OptionalText(p.value)},
                 {"default", OptionalText(p.default_value)},
                 {"enum", TextList(ctx, p.enum_values)},
                 {"description", Text(p.description)},
                 {"globalName", Text(p.global_name)},
                 {"valueFrom", [&](const std::string& f, const YAML::Node& n) -> Status {
                    ValueFrom v;
                    HEADWAY_RETURN_IF_ERROR(ParseValueFrom(ctx, f, n, v));
                    p.value_from = std::move(v);
                    return Status::Ok();
                  }}};
  return WalkFields(ctx, path, node, rules);
}

Status ParseArchive(Context& ctx, const std::string& path, const YAML::Node& node, Artifact& a) {
  int kinds = 0;
  FieldRules rules;
  auto kind = [&](ArchiveKind k) {
    return [&, k](const std::string& p, const YAML::Node& n) -> Status {
      ++kinds;
      a.archive = k;
      FieldRules inner;
      if (k == ArchiveKind::kTar)
        inner.parse = {{"compressionLevel", Integer(a.tar_compression_level, -1, 9)}};
      return WalkFields(ctx, p, n, inner);
    };
  };
  rules.parse = {{"none", kind(ArchiveKind::kNone)},
                 {"tar", kind(ArchiveKind::kTar)},
                 {"zip", kind(ArchiveKind::kZip)}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  if (kinds > 1) return FieldError(path, node, "must be one of none, tar or zip");
  return Status::Ok();
}

Status ParseS3(Context& ctx, const std::string& path, const YAML::Node& node, S3Location& s3) {
  FieldRules rules;
  rules.parse = {{"key", Text(s3.key)},
                 {"bucket", Text(s3.bucket)},
                 {"endpoint", Text(s3.endpoint)},
                 {"region", Text(s3.region)}};
  const char* kCredentials = "Headway uses the server's artifact store and its credentials";
  for (const char* name :
       {"insecure", "accessKeySecret", "secretKeySecret", "sessionTokenSecret", "roleARN",
        "useSDKCreds", "encryptionOptions", "caSecret", "createBucketIfNotPresent"}) {
    rules.ignored[name] = kCredentials;
  }
  return WalkFields(ctx, path, node, rules);
}

Status ParseArtifact(Context& ctx, const std::string& path, const YAML::Node& node, Artifact& a) {
  FieldRules rules;
  rules.parse = {{"name", Text(a.name)},
                 {"path", Text(a.path)},
                 {"from", Text(a.from)},
                 {"fromExpression", Text(a.from_expression)},
                 {"globalName", Text(a.global_name)},
                 {"subPath", Text(a.sub_path)},
                 {"mode", Integer(a.mode, 0, 07777)},
                 {"optional", Bool(a.optional)},
                 {"archive", [&](const std::string& p,
                                 const YAML::Node& n) { return ParseArchive(ctx, p, n, a); }},
                 {"s3",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    S3Location s3;
                    HEADWAY_RETURN_IF_ERROR(ParseS3(ctx, p, n, s3));
                    a.s3 = std::move(s3);
                    return Status::Ok();
                  }},
                 {"raw",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    std::string data;
                    FieldRules r;
                    r.parse = {{"data", Text(data)}};
                    HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
                    a.raw_data = std::move(data);
                    return Status::Ok();
                  }},
                 {"http", [&](const std::string& p, const YAML::Node& n) -> Status {
                    FieldRules r;
                    r.parse = {{"url", Text(a.http_url)}};
                    r.refused = {{"headers", "give a URL that needs no headers"},
                                 {"auth", "give a URL that needs no credentials"}};
                    return WalkFields(ctx, p, n, r);
                  }}};
  rules.ignored = {{"archiveLogs", "logs are kept by Headway for every job"},
                   {"artifactGC", "artifacts follow the artifact store's retention"},
                   {"deleted", "set by Argo's controller"},
                   {"recurseMode", "directories are always archived whole"}};
  const char* kSources =
      "artifacts live in Headway's artifact store (s3, raw and http sources work)";
  for (const char* name : {"git", "gcs", "hdfs", "oss", "azure", "artifactory", "plugin"}) {
    rules.refused[name] = kSources;
  }
  return WalkFields(ctx, path, node, rules, &a.recorded);
}

Status ParseIo(Context& ctx, const std::string& path, const YAML::Node& node,
               ParametersAndArtifacts& io) {
  FieldRules rules;
  rules.parse = {{"parameters",
                  [&](const std::string& p, const YAML::Node& n) {
                    return ParseList(ctx, p, n, io.parameters,
                                     [&](const std::string& ip, const YAML::Node& in,
                                         Parameter& v) { return ParseParameter(ctx, ip, in, v); });
                  }},
                 {"artifacts", [&](const std::string& p, const YAML::Node& n) {
                    return ParseList(ctx, p, n, io.artifacts,
                                     [&](const std::string& ip, const YAML::Node& in, Artifact& v) {
                                       return ParseArtifact(ctx, ip, in, v);
                                     });
                  }}};
  // Outputs carry these only in a workflow's status; an exported manifest may have them.
  rules.ignored = {{"result", "set when the node runs"}, {"exitCode", "set when the node runs"}};
  return WalkFields(ctx, path, node, rules);
}

Handler Io(Context& ctx, ParametersAndArtifacts& io) {
  return [&ctx, &io](const std::string& p, const YAML::Node& n) { return ParseIo(ctx, p, n, io); };
}

// ---- containers --------------------------------------------------------------

Status ParseEnvVar(Context& ctx, const std::string& path, const YAML::Node& node, EnvVar& e) {
  FieldRules rules;
  rules.parse = {{"name", Text(e.name)}, {"value", Text(e.value)}};
  rules.refused = {
      {"valueFrom",
       "Secrets, ConfigMaps and the downward API do not exist in Headway; give a value"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  if (e.name.empty()) return FieldError(path, node, "an env entry needs a name");
  return Status::Ok();
}

Status ParseResources(Context& ctx, const std::string& path, const YAML::Node& node,
                      ResourceRequirements& r) {
  FieldRules rules;
  rules.parse = {{"limits", TextMap(ctx, r.limits)}, {"requests", TextMap(ctx, r.requests)}};
  rules.ignored = {{"claims", "dynamic resource claims do not exist in Headway"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  for (const auto& [map, side] :
       {std::pair{&r.limits, "limits"}, std::pair{&r.requests, "requests"}}) {
    for (const auto& [name, unused] : *map) {
      if (name == "nvidia.com/gpu" || name == "cpu" || name == "memory") continue;
      std::string field = path + "." + side + "." + name;
      ctx.warnings.push_back(
          {field, ctx.lines[field], "ignored: Headway allocates nvidia.com/gpu, cpu and memory"});
    }
  }
  return Status::Ok();
}

Status ParseContainer(Context& ctx, const std::string& path, const YAML::Node& node, Container& c,
                      bool script) {
  FieldRules rules;
  rules.parse = {{"name", Text(c.name)},
                 {"image", Text(c.image)},
                 {"command", TextList(ctx, c.command)},
                 {"args", TextList(ctx, c.args)},
                 {"env",
                  [&](const std::string& p, const YAML::Node& n) {
                    return ParseList(ctx, p, n, c.env,
                                     [&](const std::string& ip, const YAML::Node& in, EnvVar& e) {
                                       return ParseEnvVar(ctx, ip, in, e);
                                     });
                  }},
                 {"workingDir", Text(c.working_dir)},
                 {"resources", [&](const std::string& p, const YAML::Node& n) {
                    return ParseResources(ctx, p, n, c.resources);
                  }}};
  if (script) rules.parse["source"] = Text(c.source);
  for (const char* name :
       {"imagePullPolicy", "ports", "volumeMounts", "volumeDevices", "securityContext",
        "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
        "terminationMessagePolicy", "stdin", "stdinOnce", "tty", "resizePolicy", "restartPolicy"}) {
    rules.ignored[name] = "a Kubernetes container setting Headway's executors do not apply";
  }
  rules.refused = {{"envFrom", "Secrets and ConfigMaps do not exist in Headway; list env values"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &c.recorded));
  if (c.image.empty() && c.command.empty() && c.source.empty()) {
    return FieldError(path, node, "needs an image or a command");
  }
  return Status::Ok();
}

// ---- tasks and steps ---------------------------------------------------------

Status ParseSequence(Context& ctx, const std::string& path, const YAML::Node& node, Sequence& s) {
  FieldRules rules;
  rules.parse = {{"count", IntOrStr(s.count)},
                 {"start", IntOrStr(s.start)},
                 {"end", IntOrStr(s.end)},
                 {"format", Text(s.format)}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  if (s.count && s.end) return FieldError(path, node, "has both count and end: give one");
  if (!s.count && !s.end) return FieldError(path, node, "needs count or end");
  return Status::Ok();
}

Handler TemplateRefField(Context& ctx, std::optional<TemplateRef>& out) {
  return [&ctx, &out](const std::string& p, const YAML::Node& n) -> Status {
    TemplateRef ref;
    FieldRules r;
    r.parse = {{"name", Text(ref.name)},
               {"template", Text(ref.template_name)},
               {"clusterScope", Bool(ref.cluster_scope)}};
    HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
    if (ref.name.empty() || ref.template_name.empty()) {
      return FieldError(p, n, "needs name (a WorkflowTemplate) and template");
    }
    out = std::move(ref);
    return Status::Ok();
  };
}

// hooks (LifecycleHooks): kept as written in `recorded`; the exit hook is
// also parsed to be run, the others are reported as not run.
Handler Hooks(Context& ctx, std::optional<LifecycleHook>& exit, RecordedFields& recorded) {
  return [&ctx, &exit, &recorded](const std::string& p, const YAML::Node& n) -> Status {
    auto value = ToJsonValue(ctx, p, n, 0);
    if (!value.ok()) return value.status();
    if (!n.IsMap()) return FieldError(p, n, "must be a map, got " + TypeName(n));
    for (const auto& kv : n) {
      if (!kv.first.IsScalar()) return FieldError(p, kv.first, "hook names must be strings");
      const std::string name = kv.first.Scalar();
      const std::string hp = p + "." + name;
      LifecycleHook hook;
      FieldRules r;
      r.parse = {{"template", Text(hook.template_name)},
                 {"templateRef", TemplateRefField(ctx, hook.template_ref)},
                 {"arguments", Io(ctx, hook.arguments)},
                 {"expression", Text(hook.expression)}};
      HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, hp, kv.second, r));
      if (hook.template_name.empty() == !hook.template_ref.has_value()) {
        return FieldError(hp, kv.second, "needs exactly one of template and templateRef");
      }
      if (name != "exit") {
        ctx.warnings.push_back({hp, LineOf(kv.first),
                                "ignored: only the exit hook is run; other lifecycle hooks "
                                "are not run yet"});
        continue;
      }
      if (!hook.expression.empty()) {
        ctx.warnings.push_back(
            {hp + ".expression", LineOf(kv.first), "ignored: the exit hook always runs"});
      }
      exit = std::move(hook);
    }
    recorded["hooks"] = std::move(*value);
    return Status::Ok();
  };
}

Status ParseTask(Context& ctx, const std::string& path, const YAML::Node& node, Task& t, bool dag) {
  HEADWAY_RETURN_IF_ERROR(ctx.CountTemplateOrTask(path, node));
  FieldRules rules;
  rules.parse = {{"name", Text(t.name)},
                 {"template", Text(t.template_name)},
                 {"templateRef", TemplateRefField(ctx, t.template_ref)},
                 {"hooks", Hooks(ctx, t.exit_hook, t.recorded)},
                 {"arguments", Io(ctx, t.arguments)},
                 {"when", NonEmptyText(t.when)},
                 {"withItems",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    if (!n.IsSequence())
                      return FieldError(p, n, "must be a list, got " + TypeName(n));
                    auto items = ToJsonValue(ctx, p, n, 0);
                    if (!items.ok()) return items.status();
                    t.with_items.emplace();
                    for (auto& item : *items) t.with_items->push_back(std::move(item));
                    return Status::Ok();
                  }},
                 {"withParam", NonEmptyText(t.with_param)},
                 {"withSequence",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    Sequence s;
                    HEADWAY_RETURN_IF_ERROR(ParseSequence(ctx, p, n, s));
                    t.with_sequence = std::move(s);
                    return Status::Ok();
                  }},
                 {"continueOn",
                  [&](const std::string& p, const YAML::Node& n) -> Status {
                    ContinueOn c;
                    FieldRules r;
                    r.parse = {{"error", Bool(c.error)}, {"failed", Bool(c.failed)}};
                    HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
                    t.continue_on = c;
                    return Status::Ok();
                  }},
                 {"onExit", Text(t.on_exit)}};
  if (dag) {
    rules.parse["dependencies"] = TextList(ctx, t.dependencies);
    rules.parse["depends"] = NonEmptyText(t.depends);
  } else {
    rules.refused = {{"dependencies", "steps run in the order of their groups; use a dag template"},
                     {"depends", "steps run in the order of their groups; use a dag template"}};
  }
  rules.refused["inline"] = "name a template of spec.templates instead";
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &t.recorded));
  int loops = t.with_items.has_value() + !t.with_param.empty() + t.with_sequence.has_value();
  if (loops > 1)
    return FieldError(path, node, "has more than one of withItems, withParam, withSequence");
  return Status::Ok();
}

Status ParseDag(Context& ctx, const std::string& path, const YAML::Node& node, Dag& d) {
  FieldRules rules;
  rules.parse = {{"target", Text(d.target)},
                 {"failFast", OptionalBool(d.fail_fast)},
                 {"tasks", [&](const std::string& p, const YAML::Node& n) {
                    return ParseList(ctx, p, n, d.tasks,
                                     [&](const std::string& ip, const YAML::Node& in, Task& t) {
                                       return ParseTask(ctx, ip, in, t, /*dag=*/true);
                                     });
                  }}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  if (d.tasks.empty()) return FieldError(path, node, "needs at least one task");
  return Status::Ok();
}

Status ParseSteps(Context& ctx, const std::string& path, const YAML::Node& node,
                  StepGroups& groups) {
  HEADWAY_RETURN_IF_ERROR(
      ParseList(ctx, path, node, groups,
                [&](const std::string& gp, const YAML::Node& gn, std::vector<Task>& group) {
                  if (!gn.IsSequence()) {
                    return FieldError(
                        gp, gn,
                        "must be a list of steps run in parallel (write `- - name: ...`), got " +
                            TypeName(gn));
                  }
                  return ParseList(ctx, gp, gn, group,
                                   [&](const std::string& sp, const YAML::Node& sn, Task& t) {
                                     return ParseTask(ctx, sp, sn, t, /*dag=*/false);
                                   });
                }));
  return Status::Ok();
}

// ---- templates -----------------------------------------------------------------

Status ParseRetryStrategy(Context& ctx, const std::string& path, const YAML::Node& node,
                          RetryStrategy& r) {
  FieldRules rules;
  rules.parse = {
      {"limit", IntOrStr(r.limit)},
      {"retryPolicy",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         static const std::map<std::string, RetryPolicy> kPolicies = {
             {"Always", RetryPolicy::kAlways},
             {"OnFailure", RetryPolicy::kOnFailure},
             {"OnError", RetryPolicy::kOnError},
             {"OnTransientError", RetryPolicy::kOnTransientError}};
         auto text = AsText(p, n);
         if (!text.ok()) return text.status();
         auto it = kPolicies.find(*text);
         if (it == kPolicies.end()) {
           return FieldError(
               p, n, "must be Always, OnFailure, OnError or OnTransientError, got '" + *text + "'");
         }
         r.retry_policy = it->second;
         return Status::Ok();
       }},
      {"backoff",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         Backoff b;
         FieldRules br;
         br.parse = {{"duration", Text(b.duration)},
                     {"factor", IntOrStr(b.factor)},
                     {"maxDuration", Text(b.max_duration)}};
         br.ignored = {{"cap", "deprecated by Argo; use maxDuration"}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, br));
         r.backoff = std::move(b);
         return Status::Ok();
       }},
      {"expression", Text(r.expression)}};
  rules.ignored = {{"affinity", "retries run wherever the scheduler places them"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &r.recorded));
  if (r.limit && r.limit->is_int && r.limit->text.front() == '-') {
    return FieldError(path + ".limit", node["limit"], "must be >= 0");
  }
  return Status::Ok();
}

Status ParseMemoize(Context& ctx, const std::string& path, const YAML::Node& node, Memoize& m) {
  FieldRules rules;
  rules.parse = {{"key", Text(m.key)},
                 {"maxAge", Text(m.max_age)},
                 {"cache", [&](const std::string& p, const YAML::Node& n) -> Status {
                    FieldRules cache;
                    cache.parse = {{"configMap", [&](const std::string& cp, const YAML::Node& cn) {
                                      FieldRules cm;
                                      cm.parse = {{"name", Text(m.config_map_name)}};
                                      cm.ignored = {{"key", "Headway keeps its own cache"}};
                                      return WalkFields(ctx, cp, cn, cm);
                                    }}};
                    return WalkFields(ctx, p, n, cache);
                  }}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules));
  if (m.key.empty()) return FieldError(path, node, "needs a key");
  return Status::Ok();
}

Status ParseTemplateMetadata(Context& ctx, const std::string& path, const YAML::Node& node,
                             TemplateMetadata& m) {
  FieldRules rules;
  rules.parse = {{"labels", TextMap(ctx, m.labels)}, {"annotations", TextMap(ctx, m.annotations)}};
  return WalkFields(ctx, path, node, rules);
}

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

Status ParseTemplate(Context& ctx, const std::string& path, const YAML::Node& node, Template& t) {
  HEADWAY_RETURN_IF_ERROR(ctx.CountTemplateOrTask(path, node));
  std::vector<std::string> kinds;
  auto kind = [&](TemplateKind k, Handler parse) {
    return [&, k, parse](const std::string& p, const YAML::Node& n) -> Status {
      kinds.emplace_back(TemplateKindName(k));
      t.kind = k;
      return parse(p, n);
    };
  };
  auto container = [&](bool script) {
    return [&, script](const std::string& p, const YAML::Node& n) -> Status {
      Container c;
      HEADWAY_RETURN_IF_ERROR(ParseContainer(ctx, p, n, c, script));
      t.container = std::move(c);
      return Status::Ok();
    };
  };
  FieldRules rules;
  rules.parse = {{"name", Text(t.name)},
                 {"displayName", Text(t.display_name)},
                 {"inputs", Io(ctx, t.inputs)},
                 {"outputs", Io(ctx, t.outputs)},
                 {"metadata",
                  [&](const std::string& p, const YAML::Node& n) {
                    return ParseTemplateMetadata(ctx, p, n, t.metadata);
                  }},
                 {"container", kind(TemplateKind::kContainer, container(false))},
                 {"script", kind(TemplateKind::kScript, container(true))},
                 {"dag", kind(TemplateKind::kDag, Optionally(ctx, t.dag, &ParseDag))},
                 {"steps", kind(TemplateKind::kSteps, Optionally(ctx, t.steps, &ParseSteps))},
                 {"suspend", kind(TemplateKind::kSuspend,
                                  [&](const std::string& p, const YAML::Node& n) -> Status {
                                    Suspend s;
                                    FieldRules r;
                                    r.parse = {{"duration", Text(s.duration)}};
                                    HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
                                    t.suspend = std::move(s);
                                    return Status::Ok();
                                  })},
                 {"retryStrategy", Optionally(ctx, t.retry_strategy, &ParseRetryStrategy)},
                 {"activeDeadlineSeconds", IntOrStr(t.active_deadline_seconds)},
                 {"timeout", Text(t.timeout)},
                 {"parallelism", Integer(t.parallelism, 0, 1'000'000)},
                 {"failFast", OptionalBool(t.fail_fast)},
                 {"memoize", Optionally(ctx, t.memoize, &ParseMemoize)},
                 {"nodeSelector", [&](const std::string& p, const YAML::Node& n) -> Status {
                    HEADWAY_RETURN_IF_ERROR(TextMap(ctx, t.node_selector)(p, n));
                    ctx.warnings.push_back(
                        {p, LineOf(n), "ignored: Headway places jobs by GPUs, queue and team"});
                    return Status::Ok();
                  }}};
  const char* kPod = "a Kubernetes pod setting Headway's executors do not apply";
  for (const char* name :
       {"affinity", "tolerations", "schedulerName", "priorityClassName", "priority",
        "serviceAccountName", "automountServiceAccountToken", "executor", "hostAliases",
        "securityContext", "podSpecPatch", "archiveLocation"}) {
    rules.ignored[name] = kPod;
  }
  rules.ignored["volumes"] = "volumes do not exist in Headway; use artifacts";
  rules.ignored["metrics"] = "Headway exports its own metrics";
  rules.ignored["synchronization"] = "mutexes and semaphores are not enforced yet";
  rules.refused = {
      {"resource", "resource templates create Kubernetes objects"},
      {"http", "http templates are not run yet"},
      {"plugin", "executor plugins do not exist in Headway"},
      {"containerSet", "use a dag of container templates"},
      {"data", "data templates are not run yet"},
      {"daemon", "daemon templates (services for later steps) are not run yet"},
      {"sidecars", "a job runs one container's command"},
      {"initContainers", "a job runs one container's command; run it as an earlier step"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &t.recorded));
  if (kinds.empty()) {
    return FieldError(path, node,
                      "has no template type: give one of container, script, dag, steps or suspend");
  }
  if (kinds.size() > 1) {
    return FieldError(path, node,
                      "has more than one template type (" + kinds[0] + ", " + kinds[1] +
                          "): a template is of exactly one");
  }
  return Status::Ok();
}

// ---- specs -----------------------------------------------------------------------

Status ParseWorkflowSpec(Context& ctx, const std::string& path, const YAML::Node& node,
                         WorkflowSpec& s) {
  FieldRules rules;
  rules.parse = {
      {"entrypoint", Text(s.entrypoint)},
      {"arguments", Io(ctx, s.arguments)},
      {"templates",
       [&](const std::string& p, const YAML::Node& n) {
         return ParseList(ctx, p, n, s.templates,
                          [&](const std::string& ip, const YAML::Node& in, Template& t) {
                            return ParseTemplate(ctx, ip, in, t);
                          });
       }},
      {"onExit", Text(s.on_exit)},
      {"hooks", Hooks(ctx, s.exit_hook, s.recorded)},
      {"parallelism", Integer(s.parallelism, 0, 1'000'000)},
      {"activeDeadlineSeconds", Integer(s.active_deadline_seconds, 0, std::int64_t{1} << 40)},
      {"ttlStrategy",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         TtlStrategy ttl;
         FieldRules r;
         r.parse = {{"secondsAfterCompletion", Integer(ttl.seconds_after_completion, 0, INT32_MAX)},
                    {"secondsAfterSuccess", Integer(ttl.seconds_after_success, 0, INT32_MAX)},
                    {"secondsAfterFailure", Integer(ttl.seconds_after_failure, 0, INT32_MAX)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
         s.ttl_strategy = ttl;
         return Status::Ok();
       }},
      {"serviceAccountName",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         HEADWAY_RETURN_IF_ERROR(Text(s.service_account_name)(p, n));
         ctx.warnings.push_back({p, LineOf(n), "ignored: jobs run as the submitting user"});
         return Status::Ok();
       }},
      {"workflowTemplateRef",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         WorkflowTemplateRef ref;
         FieldRules r;
         r.parse = {{"name", Text(ref.name)}, {"clusterScope", Bool(ref.cluster_scope)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));
         if (ref.name.empty()) return FieldError(p, n, "needs the name of a WorkflowTemplate");
         s.workflow_template_ref = std::move(ref);
         return Status::Ok();
       }},
      {"retryStrategy", Optionally(ctx, s.retry_strategy, &ParseRetryStrategy)},
      {"suspend", OptionalBool(s.suspend)},
      {"priority", Integer(s.priority, INT32_MIN, INT32_MAX)},
      {"nodeSelector", [&](const std::string& p, const YAML::Node& n) -> Status {
         HEADWAY_RETURN_IF_ERROR(TextMap(ctx, s.node_selector)(p, n));
         ctx.warnings.push_back(
             {p, LineOf(n), "ignored: Headway places jobs by GPUs, queue and team"});
         return Status::Ok();
       }}};
  const char* kPod = "a Kubernetes pod setting Headway's executors do not apply";
  for (const char* name :
       {"affinity", "tolerations", "automountServiceAccountToken", "executor", "hostNetwork",
        "dnsPolicy", "dnsConfig", "schedulerName", "podPriorityClassName", "podPriority",
        "hostAliases", "securityContext", "podSpecPatch", "podDisruptionBudget", "podMetadata",
        "imagePullSecrets"}) {
    rules.ignored[name] = kPod;
  }
  rules.ignored["volumes"] = "volumes do not exist in Headway; use artifacts";
  rules.ignored["volumeClaimTemplates"] = "volumes do not exist in Headway; use artifacts";
  rules.ignored["volumeClaimGC"] = "volumes do not exist in Headway";
  rules.ignored["podGC"] = "Headway keeps each job until its retention ends";
  rules.ignored["metrics"] = "Headway exports its own metrics";
  rules.ignored["synchronization"] = "mutexes and semaphores are not enforced yet";
  rules.ignored["archiveLogs"] = "logs are kept by Headway for every job";
  rules.ignored["artifactRepositoryRef"] = "artifacts go to the server's artifact store";
  rules.ignored["artifactGC"] = "artifacts follow the artifact store's retention";
  rules.ignored["workflowMetadata"] = "labels come from metadata";
  rules.ignored["shutdown"] = "stop a workflow with the API";
  rules.refused = {{"templateDefaults", "write the fields on each template"}};
  return WalkFields(ctx, path, node, rules, &s.recorded);
}

bool IsCronSchedule(const std::string& text) {
  std::string s = text;
  if (s.rfind("CRON_TZ=", 0) == 0 || s.rfind("TZ=", 0) == 0) {
    auto space = s.find(' ');
    if (space == std::string::npos) return false;
    s = s.substr(space + 1);
  }
  if (!s.empty() && s.front() == '@') return s.size() > 1;
  std::size_t fields = 0;
  bool in_field = false;
  for (char c : s) {
    bool blank = c == ' ' || c == '\t';
    if (!blank && !in_field) ++fields;
    in_field = !blank;
  }
  return fields == 5;
}

Status ParseCronSpec(Context& ctx, const std::string& path, const YAML::Node& node,
                     CronWorkflowSpec& s) {
  bool has_schedule = false;
  bool has_spec = false;
  FieldRules rules;
  rules.parse = {
      {"schedule",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         std::string schedule;
         HEADWAY_RETURN_IF_ERROR(Text(schedule)(p, n));
         s.schedules.insert(s.schedules.begin(), schedule);
         s.single_schedule = true;
         has_schedule = true;
         return Status::Ok();
       }},
      {"schedules",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         std::vector<std::string> list;
         HEADWAY_RETURN_IF_ERROR(TextList(ctx, list)(p, n));
         for (std::size_t i = 0; i < list.size(); ++i) {
           if (!IsCronSchedule(list[i])) {
             return FieldError(
                 Index(p, i), n[i],
                 "must be a cron schedule like '0 * * * *' or '@hourly', got '" + list[i] + "'");
           }
         }
         s.schedules.insert(s.schedules.end(), list.begin(), list.end());
         has_schedule = has_schedule || !list.empty();
         return Status::Ok();
       }},
      {"timezone", Text(s.timezone)},
      {"concurrencyPolicy",
       [&](const std::string& p, const YAML::Node& n) -> Status {
         auto text = AsText(p, n);
         if (!text.ok()) return text.status();
         if (*text == "Allow")
           s.concurrency_policy = ConcurrencyPolicy::kAllow;
         else if (*text == "Forbid")
           s.concurrency_policy = ConcurrencyPolicy::kForbid;
         else if (*text == "Replace")
           s.concurrency_policy = ConcurrencyPolicy::kReplace;
         else
           return FieldError(p, n, "must be Allow, Forbid or Replace, got '" + *text + "'");
         return Status::Ok();
       }},
      {"startingDeadlineSeconds", Integer(s.starting_deadline_seconds, 0, std::int64_t{1} << 40)},
      {"successfulJobsHistoryLimit", Integer(s.successful_jobs_history_limit, 0, INT32_MAX)},
      {"failedJobsHistoryLimit", Integer(s.failed_jobs_history_limit, 0, INT32_MAX)},
      {"suspend", Bool(s.suspend)},
      {"when", NonEmptyText(s.when)},
      {"workflowSpec",
       [&](const std::string& p, const YAML::Node& n) {
         has_spec = true;
         return ParseWorkflowSpec(ctx, p, n, s.workflow_spec);
       }},
      {"workflowMetadata", [&](const std::string& p, const YAML::Node& n) -> Status {
         TemplateMetadata m;
         FieldRules r;
         r.parse = {{"labels", TextMap(ctx, m.labels)},
                    {"annotations", TextMap(ctx, m.annotations)}};
         HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, p, n, r));  // other ObjectMeta fields: lenient
         s.workflow_metadata = std::move(m);
         return Status::Ok();
       }}};
  rules.ignored = {{"stopStrategy", "a CronWorkflow stops when suspended"}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, path, node, rules, &s.recorded));
  if (!has_schedule) return FieldError(path, node, "needs schedule or schedules");
  if (s.single_schedule && s.schedules.size() > 1) {
    return FieldError(path, node, "has both schedule and schedules: give schedules");
  }
  if (s.single_schedule && !IsCronSchedule(s.schedules.front())) {
    return FieldError(
        path + ".schedule", node["schedule"],
        "must be a cron schedule like '0 * * * *' or '@hourly', got '" + s.schedules.front() + "'");
  }
  if (!has_spec) return FieldError(path, node, "needs workflowSpec");
  return Status::Ok();
}

// metadata is lenient: unknown fields are ignored, as an API server keeps them.
Status ParseObjectMeta(Context& ctx, const std::string& path, const YAML::Node& node,
                       ObjectMeta& m) {
  HEADWAY_RETURN_IF_ERROR(ctx.Visit(path, node));
  if (!node.IsMap()) return FieldError(path, node, "must be a map, got " + TypeName(node));
  std::map<std::string, Handler> handlers = {{"name", Text(m.name)},
                                             {"generateName", Text(m.generate_name)},
                                             {"namespace", Text(m.namespace_)},
                                             {"labels", TextMap(ctx, m.labels)},
                                             {"annotations", TextMap(ctx, m.annotations)}};
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;
    auto it = handlers.find(kv.first.Scalar());
    if (it == handlers.end()) continue;
    std::string field = path + "." + kv.first.Scalar();
    ctx.Mark(field, kv.first);
    HEADWAY_RETURN_IF_ERROR(it->second(field, kv.second));
  }
  return Status::Ok();
}

// ---- names -----------------------------------------------------------------------

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

Status CheckObjectName(const std::string& kind, const ObjectMeta& m, const YAML::Node& metadata,
                       bool name_required) {
  std::size_t max = kind == "CronWorkflow" ? kMaxCronWorkflowName : kMaxWorkflowName;
  if (!m.name.empty() && !IsValidObjectName(m.name, max)) {
    return FieldError("metadata.name", metadata["name"],
                      "must be at most " + std::to_string(max) +
                          " lowercase letters, digits, '-' or '.', starting and ending with a "
                          "letter or digit, got '" +
                          m.name + "'");
  }
  if (!m.generate_name.empty() &&
      !IsValidObjectName(m.generate_name + "x", max - kGenerateNameSuffix + 1)) {
    return FieldError("metadata.generateName", metadata["generateName"],
                      "must be a name prefix of at most " +
                          std::to_string(max - kGenerateNameSuffix) +
                          " lowercase letters, digits, '-' or '.', got '" + m.generate_name + "'");
  }
  if (m.name.empty() && (name_required || m.generate_name.empty())) {
    return FieldError("metadata", metadata,
                      name_required ? "needs a name" : "needs a name or a generateName");
  }
  return Status::Ok();
}

// ---- documents -----------------------------------------------------------------------

// Whether a line starts with "---" or "...": only then can the text hold
// more than one YAML document.
bool HasDocumentMarker(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    std::string_view line = text.substr(at, text.find('\n', at) - at);
    if (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) return true;
    std::size_t newline = text.find('\n', at);
    if (newline == std::string_view::npos) break;
    at = newline + 1;
  }
  return false;
}

Result<std::vector<YAML::Node>> LoadDocuments(std::string_view text) {
  if (text.size() > kMaxManifestBytes) {
    return Status(StatusCode::kPayloadTooLarge,
                  "the manifest is " + std::to_string(text.size()) + " bytes; at most " +
                      std::to_string(kMaxManifestBytes) + " are accepted");
  }
  auto first = yaml_fields::Load(text);  // UTF-8 and syntax errors, with their line
  if (!first.ok()) return first.status();
  if (!HasDocumentMarker(text)) {
    if (first->IsNull()) return InvalidArgument("the manifest is empty");
    return std::vector<YAML::Node>{*first};
  }
  auto all = yaml_fields::LoadAll(text, kMaxDocuments);
  if (!all.ok()) return all.status();
  std::vector<YAML::Node> documents;
  for (auto& doc : *all) {
    if (!doc.IsNull()) documents.push_back(std::move(doc));
  }
  if (documents.empty()) return InvalidArgument("the manifest is empty");
  return documents;
}

Result<Manifest> ParseDocument(const YAML::Node& root) {
  Context ctx;
  if (!root.IsMap()) return FieldError("", root, "a manifest must be a map, got " + TypeName(root));
  std::string api_version, kind;
  ObjectMeta meta;
  YAML::Node metadata, spec;  // a default YAML::Node is a defined null: keep track
  bool has_metadata = false, has_spec = false;
  FieldRules rules;
  rules.parse = {{"apiVersion", Text(api_version)},
                 {"kind", Text(kind)},
                 {"metadata",
                  [&](const std::string&, const YAML::Node& n) {
                    metadata = n;
                    has_metadata = true;
                    return Status::Ok();
                  }},
                 {"spec",
                  [&](const std::string&, const YAML::Node& n) {
                    spec = n;
                    has_spec = true;
                    return Status::Ok();
                  }},
                 {"status", [](const std::string&, const YAML::Node&) { return Status::Ok(); }}};
  HEADWAY_RETURN_IF_ERROR(WalkFields(ctx, "", root, rules));
  if (api_version != kApiVersion) {
    return FieldError("apiVersion", root["apiVersion"] ? root["apiVersion"] : root,
                      "must be " + std::string(kApiVersion) + ", got '" + api_version + "'");
  }
  if (kind != "Workflow" && kind != "WorkflowTemplate" && kind != "CronWorkflow") {
    return FieldError("kind", root["kind"] ? root["kind"] : root,
                      "must be Workflow, WorkflowTemplate or CronWorkflow, got '" + kind + "'");
  }
  if (!has_metadata) return FieldError("metadata", root, "is required");
  if (!has_spec) return FieldError("spec", root, "is required");
  HEADWAY_RETURN_IF_ERROR(ParseObjectMeta(ctx, "metadata", metadata, meta));
  HEADWAY_RETURN_IF_ERROR(
      CheckObjectName(kind, meta, metadata, /*name_required=*/kind != "Workflow"));
  if (auto bad = BadHeadwayKey(meta.labels, meta.annotations)) {
    std::string field = "metadata." + bad->first;
    Status s = InvalidArgument(bad->second);
    return s.WithField(
        field, ctx.lines.count(field) ? std::optional<int>(ctx.lines[field]) : std::nullopt);
  }

  Manifest out;
  if (kind == "CronWorkflow") {
    CronWorkflow cron{std::move(meta), {}};
    HEADWAY_RETURN_IF_ERROR(ParseCronSpec(ctx, "spec", spec, cron.spec));
    HEADWAY_RETURN_IF_ERROR(ValidateWorkflowSpec(cron.spec.workflow_spec, SpecOwner::kWorkflow,
                                                 "spec.workflowSpec", &ctx.lines));
    out.resource = std::move(cron);
  } else {
    WorkflowSpec parsed;
    HEADWAY_RETURN_IF_ERROR(ParseWorkflowSpec(ctx, "spec", spec, parsed));
    SpecOwner owner = kind == "Workflow" ? SpecOwner::kWorkflow : SpecOwner::kWorkflowTemplate;
    HEADWAY_RETURN_IF_ERROR(ValidateWorkflowSpec(parsed, owner, "spec", &ctx.lines));
    if (owner == SpecOwner::kWorkflow) {
      out.resource = Workflow{std::move(meta), std::move(parsed)};
    } else {
      out.resource = WorkflowTemplate{std::move(meta), std::move(parsed)};
    }
  }
  out.warnings = std::move(ctx.warnings);
  out.lines = std::move(ctx.lines);
  return out;
}

Result<Manifest> ParseDocumentSafely(const YAML::Node& root) {
  return yaml_fields::CatchYamlErrors<Manifest>([&] { return ParseDocument(root); });
}

}  // namespace

bool IsValidObjectName(std::string_view name, std::size_t max_length) {
  if (name.empty() || name.size() > max_length) return false;
  if (!IsLowerAlnum(name.front()) || !IsLowerAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-' || c == '.'; });
}

bool IsValidTemplateName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFieldNameLength || !IsAlnum(name.front())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsAlnum(c) || c == '-'; });
}

bool IsValidParameterName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFieldNameLength) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return IsAlnum(c) || c == '_' || c == '-'; });
}

Result<Manifest> ParseManifest(std::string_view text) {
  auto documents = LoadDocuments(text);
  if (!documents.ok()) return documents.status();
  if (documents->size() > 1) {
    return InvalidArgument("the manifest holds " + std::to_string(documents->size()) +
                           " documents; submit them one at a time");
  }
  return ParseDocumentSafely(documents->front());
}

Result<std::vector<Manifest>> ParseManifests(std::string_view text) {
  auto documents = LoadDocuments(text);
  if (!documents.ok()) return documents.status();
  std::vector<Manifest> out;
  for (std::size_t i = 0; i < documents->size(); ++i) {
    auto manifest = ParseDocumentSafely((*documents)[i]);
    if (!manifest.ok()) {
      Status s = manifest.status();
      std::string field = Index("documents", i) + (s.field().empty() ? "" : "." + s.field());
      return s.WithField(field, s.line());
    }
    out.push_back(std::move(*manifest));
  }
  return out;
}

}  // namespace headway::workflow
