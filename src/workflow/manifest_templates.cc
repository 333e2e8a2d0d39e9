// The parse of a template and what it holds: inputs, outputs and
// arguments, containers, DAG tasks and steps, retries and memoization.
// manifest.cc parses the documents and specs around them.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "workflow/manifest_internal.h"

namespace headway::workflow::internal {
namespace {

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

}  // namespace

Handler Io(Context& ctx, ParametersAndArtifacts& io) {
  return [&ctx, &io](const std::string& p, const YAML::Node& n) { return ParseIo(ctx, p, n, io); };
}

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

}  // namespace headway::workflow::internal
