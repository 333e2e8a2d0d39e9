#include "api/argo_routes.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "api/file_stream.h"
#include "api/job_json.h"
#include "api/workflow_logs.h"

namespace headway::api {
namespace {

using nlohmann::json;

// gRPC's codes, as Argo Server's gateway puts them in error bodies.
int GrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return 3;
    case StatusCode::kNotFound:
      return 5;
    case StatusCode::kConflict:
      return 6;
    case StatusCode::kPermissionDenied:
      return 7;
    case StatusCode::kResourceExhausted:
      return 8;
    case StatusCode::kPayloadTooLarge:
      return 3;
    case StatusCode::kUnauthenticated:
      return 16;
    case StatusCode::kUnavailable:
      return 14;
    case StatusCode::kInternal:
      return 13;
  }
  return 2;
}

std::string MessageOf(const Status& status) {
  if (status.field().empty()) return status.message();
  std::string where = status.field();
  if (status.line()) where += " (line " + std::to_string(*status.line()) + ")";
  return where + ": " + status.message();
}

HttpResponse ArgoJson(int status, const json& body) {
  return {status, "application/json", JsonText(body), {}, nullptr};
}

HttpResponse ArgoError(const Status& status) {
  return ArgoJson(HttpStatusFor(status.code()),
                  {{"code", GrpcCode(status.code())}, {"message", MessageOf(status)}});
}

HttpResponse NotImplemented(const std::string& what) {
  return ArgoJson(501, {{"code", 12}, {"message", what + " is not implemented by this server"}});
}

// Argo's request bodies: one object, with the resource under `key`.
Result<json> RequestBody(const HttpRequest& req) {
  if (req.body.empty()) return json::object();
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument("the request body must be a JSON object");
  }
  return body;
}

// A boolean field of a request body: false when absent.
Result<bool> BoolField(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return false;
  if (!it->is_boolean()) return InvalidArgument(std::string(key) + " must be true or false");
  return it->get<bool>();
}

Result<std::string> StringField(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::string();
  if (!it->is_string()) return InvalidArgument(std::string(key) + " must be a string");
  return it->get<std::string>();
}

// A list of strings ("parameters": ["a=1"]); absent or null is empty.
Result<std::vector<std::string>> StringListField(const json& body, const char* key) {
  std::vector<std::string> out;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_array()) return InvalidArgument(std::string(key) + " must be a list of strings");
  for (const json& item : *it) {
    if (!item.is_string()) return InvalidArgument(std::string(key) + " must be a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// A selector's comma-separated terms: "key=value" and "key==value" give
// key and value; a term without '=' has `has_equals` false. Each caller
// says which terms it refuses.
struct SelectorTerm {
  std::string text, key, value;
  bool has_equals = false;
};

std::vector<SelectorTerm> SelectorTerms(const std::string& text) {
  std::vector<SelectorTerm> terms;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    SelectorTerm t;
    t.text = text.substr(start, end - start);
    start = end + 1;
    if (t.text.empty()) continue;
    std::size_t eq = t.text.find('=');
    t.has_equals = eq != std::string::npos;
    t.key = t.has_equals ? t.text.substr(0, eq) : t.text;
    if (t.has_equals) t.value = t.text.substr(t.text[eq + 1] == '=' ? eq + 2 : eq + 1);
    terms.push_back(std::move(t));
  }
  return terms;
}

// `labelSelector` equalities: "a=b,c==d". Set-based selectors are refused.
Result<std::map<std::string, std::string>> LabelSelector(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const SelectorTerm& t : SelectorTerms(text)) {
    if (!t.has_equals || t.text.find("!=") != std::string::npos) {
      return InvalidArgument(
          "listOptions.labelSelector: only key=value terms are supported, not '" + t.text + "'");
    }
    out[t.key] = t.value;
  }
  return out;
}

constexpr const char* kPhaseLabel = "workflows.argoproj.io/phase";
constexpr const char* kCompletedLabel = "workflows.argoproj.io/completed";

// `fieldSelector` terms on a workflow's name and namespace ("metadata.name=x");
// Headway has no namespaces, so any namespace matches. An exact name sets
// the filter's name prefix and `exact_name`, checked whole by the caller.
Status FieldSelector(const std::string& text, WorkflowFilter& filter, std::string& exact_name) {
  for (const SelectorTerm& t : SelectorTerms(text)) {
    if (!t.has_equals || t.key.empty() || t.key.back() == '!' ||
        (t.key != "metadata.name" && t.key != "metadata.namespace")) {
      return InvalidArgument(
          "listOptions.fieldSelector: only metadata.name=NAME and "
          "metadata.namespace=NS are supported, not '" +
          t.text + "'");
    }
    if (t.key == "metadata.name") {
      filter.name_prefix = t.value;
      exact_name = t.value;
    }
  }
  return Status::Ok();
}

// The Content-Type Argo's artifact server gives by the file name's extension.
std::string ArtifactContentType(const std::string& file_name) {
  const std::size_t dot = file_name.rfind('.');
  std::string ext = dot == std::string::npos ? "" : file_name.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, std::string> kTypes = {{"txt", "text/plain; charset=utf-8"},
                                                            {"log", "text/plain; charset=utf-8"},
                                                            {"csv", "text/csv; charset=utf-8"},
                                                            {"json", "application/json"},
                                                            {"html", "text/html; charset=utf-8"},
                                                            {"htm", "text/html; charset=utf-8"},
                                                            {"png", "image/png"},
                                                            {"jpg", "image/jpeg"},
                                                            {"jpeg", "image/jpeg"},
                                                            {"gif", "image/gif"},
                                                            {"svg", "image/svg+xml"},
                                                            {"tar", "application/x-tar"},
                                                            {"gz", "application/gzip"},
                                                            {"tgz", "application/gzip"},
                                                            {"zip", "application/zip"}};
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

class ArgoRoutes {
 public:
  // One per request: `ctx` is who asks.
  ArgoRoutes(const ArgoRoutesOptions& options, const RequestContext& ctx)
      : service_(options.workflows), options_(options), ctx_(ctx) {}

  HttpResponse Create(const HttpRequest& req, const std::string& ns, bool lint) {
    auto body = RequestBody(req);
    std::string manifest;
    if (!body.ok()) {
      // Not JSON: a YAML manifest, as the native CLI sends one.
      manifest = req.body;
      body = json::object();
    } else if (body->contains("workflow")) {
      manifest = (*body)["workflow"].dump();
    } else if (body->contains("apiVersion") || body->contains("kind")) {
      manifest = req.body;  // a bare Workflow (the native CLI sends one)
    } else {
      return ArgoError(InvalidArgument("the request needs a 'workflow'").WithField("workflow"));
    }
    if (manifest.empty()) return ArgoError(InvalidArgument("the request has no workflow"));
    auto server_dry_run = BoolField(*body, "serverDryRun");
    if (!server_dry_run.ok()) return ArgoError(server_dry_run.status());
    bool dry_run = lint || *server_dry_run;
    auto view = service_->CreateWorkflow(manifest, ns, Admission(), ctx_.Creator(), dry_run);
    if (!view.ok()) return ArgoError(view.status());
    HttpResponse reply = ArgoJson(200, view->body);
    // Kubernetes' warnings: `Warning: 299 - "TEXT"`, one header each.
    for (const std::string& warning : view->warnings) {
      reply.headers.emplace_back("Warning", "299 - " + nlohmann::json(warning).dump());
    }
    return reply;
  }

  // Live workflows, or with `archived` the finished ones (Argo's archive:
  // here the same rows, indexed, kept until deleted).
  HttpResponse List(const HttpRequest& req, bool archived) {
    WorkflowFilter filter;
    filter.team = ctx_.VisibleTeam();
    filter.finished_only = archived;
    auto labels = LabelSelector(req.Query("listOptions.labelSelector"));
    if (!labels.ok()) return ArgoError(labels.status());
    filter.labels = *labels;
    // Argo keeps phase and completion as labels; here they are columns.
    if (auto phase = filter.labels.find(kPhaseLabel); phase != filter.labels.end()) {
      filter.phase = phase->second;
      filter.labels.erase(phase);
    }
    if (auto done = filter.labels.find(kCompletedLabel); done != filter.labels.end()) {
      if (done->second == "true") filter.finished_only = true;
      if (done->second == "false") filter.active_only = true;
      filter.labels.erase(done);
    }
    filter.name_prefix = req.Query("namePrefix");
    std::string exact_name = req.Query("name");  // the archive's exact-name filter
    if (!exact_name.empty()) filter.name_prefix = exact_name;
    if (Status fields = FieldSelector(req.Query("listOptions.fieldSelector"), filter, exact_name);
        !fields.ok()) {
      return ArgoError(fields);
    }
    std::string limit = req.Query("listOptions.limit");
    if (!limit.empty()) {
      if (limit.size() > 6 || limit.find_first_not_of("0123456789") != std::string::npos) {
        return ArgoError(InvalidArgument("listOptions.limit must be a whole number"));
      }
      filter.limit = std::stoul(limit);
    }
    std::string cont = req.Query("listOptions.continue");
    if (!cont.empty()) {
      if (cont.size() > 18 || cont.find_first_not_of("0123456789") != std::string::npos) {
        return ArgoError(InvalidArgument("listOptions.continue is not one this server gave"));
      }
      filter.before_seq = std::stoll(cont);
    }
    std::string phase = req.Query("phase");
    if (!phase.empty()) filter.phase = phase;
    auto all = service_->ListWorkflows(filter);
    if (!all.ok()) return ArgoError(all.status());
    json items = json::array();
    const std::string name_filter = req.Query("nameFilter");
    for (const WorkflowView& w : *all) {
      if (!ctx_.MaySee(w.team).ok()) continue;
      if (!exact_name.empty() && w.body["metadata"].value("name", "") != exact_name) continue;
      if (!name_filter.empty() &&
          w.body["metadata"].value("name", "").find(name_filter) == std::string::npos) {
        continue;
      }
      items.push_back(w.body);
    }
    json meta = json::object();
    if (filter.limit != 0 && all->size() == filter.limit && !all->empty()) {
      // Pages run newest first; the next starts below the last one's sequence.
      meta["continue"] = std::to_string(all->back().seq);
    }
    return ArgoJson(200, {{"metadata", meta}, {"items", items}});
  }

  // An archived (finished) workflow by its metadata.uid.
  Result<WorkflowView> ArchivedByUid(const std::string& uid) {
    WorkflowFilter filter;
    filter.uid = uid;
    filter.finished_only = true;
    filter.limit = 1;
    auto found = service_->ListWorkflows(filter);
    if (!found.ok()) return found.status();
    if (found->empty() || !ctx_.MaySee(found->front().team).ok()) {
      return NotFound("archived workflow '" + uid + "' not found");
    }
    return Visible(found->front().body["metadata"].value("name", ""));
  }

  // Label keys of the archived workflows the caller may see, or the values
  // of one key.
  HttpResponse ArchivedLabels(const std::string& key) {
    WorkflowFilter filter;
    filter.team = ctx_.VisibleTeam();
    filter.finished_only = true;
    auto all = service_->ListWorkflows(filter);
    if (!all.ok()) return ArgoError(all.status());
    std::set<std::string> found;
    for (const WorkflowView& w : *all) {
      if (!ctx_.MaySee(w.team).ok()) continue;
      const json& labels = w.body["metadata"]["labels"];
      if (!labels.is_object()) continue;
      for (const auto& [k, v] : labels.items()) {
        if (key.empty()) {
          found.insert(k);
        } else if (k == key && v.is_string()) {
          found.insert(v.get<std::string>());
        }
      }
    }
    return ArgoJson(200, {{"items", json(std::vector<std::string>(found.begin(), found.end()))}});
  }

  Result<WorkflowView> Visible(const std::string& name) {
    auto view = service_->GetWorkflow(name);
    if (!view.ok()) return view.status();
    HEADWAY_RETURN_IF_ERROR(ctx_.MaySee(view->team));
    return view;
  }

  template <typename Act>
  HttpResponse Change(const std::string& name, Act act) {
    auto current = Visible(name);
    if (!current.ok()) return ArgoError(current.status());
    if (Status s = ctx_.MayChange(current->team); !s.ok()) return ArgoError(s);
    Result<WorkflowView> view = act();
    if (!view.ok()) return ArgoError(view.status());
    return ArgoJson(200, view->body);
  }

  HttpResponse Delete(const std::string& name) {
    auto current = Visible(name);
    if (!current.ok()) return ArgoError(current.status());
    if (Status s = ctx_.MayChange(current->team); !s.ok()) return ArgoError(s);
    if (Status s = service_->DeleteWorkflow(name); !s.ok()) return ArgoError(s);
    return ArgoJson(200, json::object());
  }

  // Argo's RetryWorkflowRequest body: {restartSuccessful, nodeFieldSelector,
  // parameters}.
  HttpResponse Retry(const HttpRequest& req, const std::string& name) {
    auto body = RequestBody(req);
    if (!body.ok()) return ArgoError(body.status());
    auto restart = BoolField(*body, "restartSuccessful");
    if (!restart.ok()) return ArgoError(restart.status());
    auto selector = StringField(*body, "nodeFieldSelector");
    if (!selector.ok()) return ArgoError(selector.status());
    auto parameters = StringListField(*body, "parameters");
    if (!parameters.ok()) return ArgoError(parameters.status());
    WorkflowRetry retry;
    retry.restart_successful = *restart;
    retry.node_field_selector = *selector;
    retry.parameters = std::move(*parameters);
    return Change(name, [&] { return service_->RetryWorkflow(name, retry); });
  }

  // Argo's ResubmitWorkflowRequest body: {memoized, parameters}.
  HttpResponse Resubmit(const HttpRequest& req, const std::string& name) {
    auto body = RequestBody(req);
    if (!body.ok()) return ArgoError(body.status());
    auto memoized = BoolField(*body, "memoized");
    if (!memoized.ok()) return ArgoError(memoized.status());
    auto parameters = StringListField(*body, "parameters");
    if (!parameters.ok()) return ArgoError(parameters.status());
    WorkflowResubmit how;
    how.memoized = *memoized;
    how.parameters = std::move(*parameters);
    return Change(name, [&] { return service_->ResubmitWorkflow(name, how, ctx_.Creator()); });
  }

  // The name of the archived workflow `uid` names, for the calls above.
  template <typename Act>
  HttpResponse OnArchived(const std::string& uid, Act act) {
    auto view = ArchivedByUid(uid);
    if (!view.ok()) return ArgoError(view.status());
    return act(view->body["metadata"].value("name", ""));
  }

  // The caller's team rule, for what a workflow or template asks of the pool.
  TeamAdmission Admission() const {
    return [&ctx = ctx_](PoolRequest& request) { return ctx.Admit(request); };
  }

  // Argo's WorkflowLogs: the step jobs' lines, a {"result": LogEntry} a
  // line (api/workflow_logs.h). `pod` is the deprecated path's pod name.
  HttpResponse Logs(const HttpRequest& req, const std::string& name, const std::string& pod) {
    if (options_.jobs == nullptr) {
      return ArgoError(Unavailable("this server does not serve the logs of workflows"));
    }
    auto view = Visible(name);
    if (!view.ok()) return ArgoError(view.status());
    auto request = ParseWorkflowLogQuery(req.query);
    if (!request.ok()) return ArgoError(request.status());
    if (!pod.empty()) request->pod_name = pod;
    WorkflowService* service = service_;
    auto look = [service, name]() -> Result<json> {
      auto now = service->GetWorkflow(name);
      if (!now.ok()) return now.status();
      return std::move(now->body);
    };
    auto stream = std::make_shared<WorkflowLogStream>(look, std::move(view->body), options_.jobs,
                                                      options_.cache, std::move(*request));
    HttpResponse reply{200, "application/json", "", {}, nullptr};
    if (!options_.bind_stream) {
      reply.stream = std::move(stream);
      return reply;
    }
    return options_.bind_stream(ctx_, std::move(reply), std::move(stream));
  }

  // The bytes the artifact store keeps for a node's output (or input)
  // artifact, as Argo's artifact server sends them.
  HttpResponse ArtifactFile(const Result<WorkflowView>& wf, const std::string& node_id,
                            const std::string& direction, const std::string& artifact_name) {
    if (!wf.ok()) return ArgoError(wf.status());
    if (direction != "outputs" && direction != "inputs") {
      return ArgoError(InvalidArgument(
          "an artifact is one of a node's 'outputs' or 'inputs', not '" + direction + "'"));
    }
    if (options_.artifacts == nullptr) {
      return ArgoError(Unavailable("this server keeps no artifacts"));
    }
    const json& body = wf->body;
    const std::string wf_name = body.contains("metadata") && body["metadata"].is_object()
                                    ? body["metadata"].value("name", "")
                                    : "";
    const json nodes = body.contains("status") && body["status"].is_object()
                           ? body["status"].value("nodes", json::object())
                           : json::object();
    if (!nodes.is_object() || !nodes.contains(node_id) || !nodes[node_id].is_object()) {
      return ArgoError(NotFound("workflow '" + wf_name + "' has no node '" + node_id + "'"));
    }
    const json& node = nodes[node_id];
    const json io = node.value(direction, json::object());
    const json list = io.is_object() ? io.value("artifacts", json::array()) : json::array();
    const json* entry = nullptr;
    for (const json& a : list) {
      if (a.is_object() && a.value("name", "") == artifact_name) entry = &a;
    }
    const std::string what = "node '" + node_id + "' of workflow '" + wf_name + "' has no " +
                             (direction == "outputs" ? "output" : "input") + " artifact '" +
                             artifact_name + "'";
    if (entry == nullptr) return ArgoError(NotFound(what));
    std::string ref;
    if (entry->contains("headway") && (*entry)["headway"].is_object()) {
      ref = (*entry)["headway"].value("artifact", "");
    }
    if (ref.empty()) return ArgoError(NotFound(what + " in the artifact store"));
    auto parsed = ParseArtifactRef(ref);
    if (!parsed.ok()) return ArgoError(NotFound(what + " in the artifact store"));
    auto artifact = options_.artifacts->Get(parsed->name, parsed->version);
    // The workflow's own team's artifact only, as its steps read them.
    if (!artifact.ok() || artifact->team != wf->team) {
      return ArgoError(NotFound(what + " in the artifact store (" + ref + ")"));
    }
    if (Status s = ctx_.MaySee(artifact->team); !s.ok()) return ArgoError(s);
    auto download = options_.artifacts->Open(artifact->name, artifact->version, std::nullopt);
    if (!download.ok()) return ArgoError(download.status());
    int fd = -1;
    if (download->local_path) {
      fd = ::open(download->local_path->c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return ArgoError(Unavailable("cannot read the bytes of " + artifact->Ref()));
    } else if (!options_.spool_dir.empty()) {
      // Through the server: a private copy, unlinked once open.
      std::string spooled = options_.spool_dir + "/download-XXXXXX";
      int made = ::mkstemp(spooled.data());
      if (made < 0) return ArgoError(Unavailable("cannot spool " + artifact->Ref()));
      ::close(made);
      Status fetched =
          options_.artifacts->Fetch(artifact->name, artifact->version, spooled, std::nullopt);
      if (fetched.ok()) fd = ::open(spooled.c_str(), O_RDONLY | O_CLOEXEC);
      ::unlink(spooled.c_str());
      if (!fetched.ok()) return ArgoError(fetched);
      if (fd < 0) return ArgoError(Unavailable("cannot read the bytes of " + artifact->Ref()));
    } else if (download->presigned) {
      HttpResponse r{
          307, "application/json", JsonText({{"url", download->presigned->url}}), {}, nullptr};
      r.headers.emplace_back("Location", download->presigned->url);
      return r;
    } else {
      return ArgoError(Unavailable("the artifact store cannot serve " + artifact->Ref()));
    }
    // Argo names the file by its key: NAME.tgz for an archive, the file's
    // own name for one kept as it is. Here an archive is a tar.
    const bool tar = artifact->labels.count("headway.dev/archive") &&
                     artifact->labels.at("headway.dev/archive") == "tar";
    std::string file_name = entry->value("path", "");
    file_name = file_name.substr(file_name.find_last_of('/') + 1);
    if (tar || file_name.empty()) file_name = artifact_name + (tar ? ".tar" : "");
    for (char& c : file_name) {
      if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '_';
    }
    HttpResponse reply{200, ArtifactContentType(file_name), "", {}, nullptr};
    reply.headers.emplace_back("Content-Disposition", "filename=\"" + file_name + "\"");
    // What a step wrote is shown, never run: as Argo's artifact server.
    reply.headers.emplace_back("Content-Security-Policy",
                               "sandbox; base-uri 'none'; default-src 'none'; img-src 'self'; "
                               "style-src 'self' 'unsafe-inline'");
    reply.headers.emplace_back("X-Frame-Options", "SAMEORIGIN");
    auto bytes = FileStream::Adopt(fd);
    if (!options_.bind_stream) {
      reply.stream = std::move(bytes);
      return reply;
    }
    return options_.bind_stream(ctx_, std::move(reply), std::move(bytes));
  }

  WorkflowService* service_;
  const ArgoRoutesOptions& options_;
  const RequestContext& ctx_;
};

}  // namespace

bool IsArgoPath(std::string_view path) {
  for (std::string_view prefix :
       {"/api/v1/workflows/", "/api/v1/workflow-templates", "/api/v1/cron-workflows",
        "/api/v1/cluster-workflow-templates", "/api/v1/archived-workflows",
        "/api/v1/workflow-events/", "/api/v1/info", "/api/v1/userinfo", "/artifact-files/",
        "/artifacts/", "/artifacts-by-uid/", "/input-artifacts/", "/input-artifacts-by-uid/"}) {
    if (path.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

void ToArgoError(HttpResponse& response) {
  if (response.status < 400 || response.content_type != "application/json") return;
  json body = json::parse(response.body, nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return;
  const json& e = body["error"];
  StatusCode code = StatusCode::kInternal;
  for (StatusCode c :
       {StatusCode::kInvalidArgument, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied,
        StatusCode::kNotFound, StatusCode::kConflict, StatusCode::kPayloadTooLarge,
        StatusCode::kResourceExhausted, StatusCode::kInternal, StatusCode::kUnavailable}) {
    if (StatusCodeName(c) == e.value("code", "")) code = c;
  }
  Status status(code, e.value("message", ""));
  if (e.contains("field")) {
    status.WithField(e.value("field", ""),
                     e.contains("line") ? std::optional<int>(e.value("line", 0)) : std::nullopt);
  }
  response.body = JsonText({{"code", GrpcCode(status.code())}, {"message", MessageOf(status)}});
}

void AddArgoRoutes(Router& router, ArgoRoutesOptions options) {
  auto shared = std::make_shared<const ArgoRoutesOptions>(std::move(options));
  auto guarded = [shared](auto handler) {
    return
        [shared, handler](const HttpRequest& req, const PathParams& p, const RequestContext& ctx) {
          if (shared->workflows == nullptr) {
            return ArgoError(Unavailable("workflows are not enabled on this server"));
          }
          ArgoRoutes routes(*shared, ctx);
          return handler(routes, req, p);
        };
  };
  const std::string base = "/api/v1/workflows/{ns}";
  router.Add("POST", base, guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.Create(req, p.at("ns"), false);
             }));
  router.Add("POST", base + "/lint", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.Create(req, p.at("ns"), true);
             }));
  router.Add("GET", base,
             guarded([](ArgoRoutes& r, auto& req, auto&) { return r.List(req, false); }));
  router.Add("GET", base + "/{name}", guarded([](ArgoRoutes& r, auto&, auto& p) {
               auto view = r.Visible(p.at("name"));
               if (!view.ok()) return ArgoError(view.status());
               return ArgoJson(200, view->body);
             }));
  router.Add("DELETE", base + "/{name}",
             guarded([](ArgoRoutes& r, auto&, auto& p) { return r.Delete(p.at("name")); }));
  router.Add("PUT", base + "/{name}/suspend", guarded([](ArgoRoutes& r, auto&, auto& p) {
               const std::string name = p.at("name");
               return r.Change(name, [&] { return r.service_->SuspendWorkflow(name); });
             }));
  router.Add("PUT", base + "/{name}/resume", guarded([](ArgoRoutes& r, auto&, auto& p) {
               const std::string name = p.at("name");
               return r.Change(name, [&] { return r.service_->ResumeWorkflow(name); });
             }));
  router.Add("PUT", base + "/{name}/stop", guarded([](ArgoRoutes& r, auto&, auto& p) {
               const std::string name = p.at("name");
               return r.Change(name, [&] { return r.service_->StopWorkflow(name, false); });
             }));
  router.Add("PUT", base + "/{name}/terminate", guarded([](ArgoRoutes& r, auto&, auto& p) {
               const std::string name = p.at("name");
               return r.Change(name, [&] { return r.service_->StopWorkflow(name, true); });
             }));
  router.Add("PUT", base + "/{name}/retry",
             guarded([](ArgoRoutes& r, auto& req, auto& p) { return r.Retry(req, p.at("name")); }));
  router.Add("PUT", base + "/{name}/resubmit", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.Resubmit(req, p.at("name"));
             }));
  // Argo's WorkflowLogs, and the deprecated PodLogs with the pod in the path.
  router.Add("GET", base + "/{name}/log", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.Logs(req, p.at("name"), "");
             }));
  router.Add("GET", base + "/{name}/{pod}/log", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.Logs(req, p.at("name"), p.at("pod"));
             }));
  // Argo's artifact server: a live workflow by name, an archived one by uid.
  router.Add(
      "GET", "/artifact-files/{ns}/{kind}/{id}/{node}/{direction}/{artifact}",
      guarded([](ArgoRoutes& r, auto&, auto& p) {
        const std::string& kind = p.at("kind");
        if (kind != "workflows" && kind != "archived-workflows") {
          return ArgoError(InvalidArgument(
              "artifact-files serves 'workflows' or 'archived-workflows', not '" + kind + "'"));
        }
        auto wf = kind == "workflows" ? r.Visible(p.at("id")) : r.ArchivedByUid(p.at("id"));
        return r.ArtifactFile(wf, p.at("node"), p.at("direction"), p.at("artifact"));
      }));
  for (bool input : {false, true}) {
    const std::string direction = input ? "inputs" : "outputs";
    router.Add(
        "GET",
        std::string(input ? "/input-artifacts" : "/artifacts") + "/{ns}/{name}/{node}/{artifact}",
        guarded([direction](ArgoRoutes& r, auto&, auto& p) {
          return r.ArtifactFile(r.Visible(p.at("name")), p.at("node"), direction, p.at("artifact"));
        }));
    router.Add("GET",
               std::string(input ? "/input-artifacts-by-uid" : "/artifacts-by-uid") +
                   "/{uid}/{node}/{artifact}",
               guarded([direction](ArgoRoutes& r, auto&, auto& p) {
                 return r.ArtifactFile(r.ArchivedByUid(p.at("uid")), p.at("node"), direction,
                                       p.at("artifact"));
               }));
  }
  router.Add("PUT", base + "/{name}/set",
             [](auto&, auto&, auto&) { return NotImplemented("setting a node's outputs"); });
  router.Add(
      "POST", base + "/submit", guarded([](ArgoRoutes& r, auto& req, auto&) {
        auto body = RequestBody(req);
        if (!body.ok()) return ArgoError(body.status());
        auto kind = StringField(*body, "resourceKind");
        auto name = StringField(*body, "resourceName");
        if (!kind.ok()) return ArgoError(kind.status());
        if (!name.ok()) return ArgoError(name.status());
        std::string k = *kind;
        if (k == "workflowtemplate" || k == "WorkflowTemplate")
          k = std::string(kWorkflowTemplateKind);
        if (k == "cronworkflow" || k == "CronWorkflow" || k == "cronwf")
          k = std::string(kCronWorkflowKind);
        if (k != kWorkflowTemplateKind && k != kCronWorkflowKind) {
          return ArgoError(
              InvalidArgument("resourceKind must be WorkflowTemplate or CronWorkflow"));
        }
        auto source = r.service_->GetManifest(k, *name);
        if (!source.ok()) return ArgoError(source.status());
        if (Status s = r.ctx_.MayChange(source->team); !s.ok()) return ArgoError(s);
        SubmitOptions options;
        if (body->contains("submitOptions") && (*body)["submitOptions"].is_object()) {
          const json& o = (*body)["submitOptions"];
          if (o.contains("parameters") && o["parameters"].is_array()) {
            for (const json& p : o["parameters"]) {
              if (!p.is_string())
                return ArgoError(InvalidArgument("submitOptions.parameters must be strings"));
              options.parameters.push_back(p);
            }
          }
          auto labels = StringField(o, "labels");
          auto wf_name = StringField(o, "name");
          auto generate = StringField(o, "generateName");
          for (auto* f : {&labels, &wf_name, &generate}) {
            if (!f->ok()) return ArgoError(f->status());
          }
          options.labels = *labels;
          options.name = *wf_name;
          options.generate_name = *generate;
        }
        auto view = r.service_->SubmitFrom(k, *name, options, r.ctx_.Creator());
        if (!view.ok()) return ArgoError(view.status());
        return ArgoJson(200, view->body);
      }));
  router.Add("GET", "/api/v1/info", [](auto&, auto&, auto&) {
    return ArgoJson(200, {{"modals", json::object()}, {"navColor", ""}});
  });
  router.Add("GET", "/api/v1/userinfo",
             [](auto&, auto&, auto&) { return ArgoJson(200, json::object()); });
  // WorkflowTemplates and CronWorkflows: the same five calls each, the
  // resource under its own key in the request body.
  struct Library {
    std::string path;
    std::string_view kind;
    const char* key;
  };
  for (const Library& lib :
       {Library{"/api/v1/workflow-templates/{ns}", kWorkflowTemplateKind, "template"},
        Library{"/api/v1/cron-workflows/{ns}", kCronWorkflowKind, "cronWorkflow"}}) {
    const std::string kind(lib.kind);
    const std::string key = lib.key;
    auto manifest_of = [key](const HttpRequest& req) -> Result<std::string> {
      auto body = RequestBody(req);
      if (!body.ok()) return req.body;  // YAML from the native CLI
      if (body->contains(key)) return (*body)[key].dump();
      if (body->contains("apiVersion") || body->contains("kind")) return req.body;
      return Status(InvalidArgument("the request needs a '" + key + "'").WithField(key));
    };
    for (bool lint : {false, true}) {
      router.Add("POST", lint ? lib.path + "/lint" : lib.path,
                 guarded([kind, manifest_of, lint](ArgoRoutes& r, auto& req, auto& p) {
                   auto manifest = manifest_of(req);
                   if (!manifest.ok()) return ArgoError(manifest.status());
                   auto view =
                       r.service_->CreateManifest(kind, *manifest, p.at("ns"), r.Admission(), lint);
                   if (!view.ok()) return ArgoError(view.status());
                   return ArgoJson(200, view->body);
                 }));
    }
    router.Add("GET", lib.path, guarded([kind](ArgoRoutes& r, auto&, auto&) {
                 auto all = r.service_->ListManifests(kind, r.ctx_.VisibleTeam());
                 if (!all.ok()) return ArgoError(all.status());
                 json items = json::array();
                 for (const ManifestView& m : *all) {
                   if (r.ctx_.MaySee(m.team).ok()) items.push_back(m.body);
                 }
                 return ArgoJson(200, {{"metadata", json::object()}, {"items", items}});
               }));
    router.Add("GET", lib.path + "/{name}", guarded([kind](ArgoRoutes& r, auto&, auto& p) {
                 auto view = r.service_->GetManifest(kind, p.at("name"));
                 if (!view.ok()) return ArgoError(view.status());
                 if (Status s = r.ctx_.MaySee(view->team); !s.ok()) return ArgoError(s);
                 return ArgoJson(200, view->body);
               }));
    router.Add("PUT", lib.path + "/{name}",
               guarded([kind, manifest_of](ArgoRoutes& r, auto& req, auto& p) {
                 auto current = r.service_->GetManifest(kind, p.at("name"));
                 if (!current.ok()) return ArgoError(current.status());
                 if (Status s = r.ctx_.MaySee(current->team); !s.ok()) return ArgoError(s);
                 if (Status s = r.ctx_.MayChange(current->team); !s.ok()) return ArgoError(s);
                 auto manifest = manifest_of(req);
                 if (!manifest.ok()) return ArgoError(manifest.status());
                 auto view =
                     r.service_->UpdateManifest(kind, p.at("name"), *manifest, r.Admission());
                 if (!view.ok()) return ArgoError(view.status());
                 return ArgoJson(200, view->body);
               }));
    router.Add("DELETE", lib.path + "/{name}", guarded([kind](ArgoRoutes& r, auto&, auto& p) {
                 auto current = r.service_->GetManifest(kind, p.at("name"));
                 if (!current.ok()) return ArgoError(current.status());
                 if (Status s = r.ctx_.MaySee(current->team); !s.ok()) return ArgoError(s);
                 if (Status s = r.ctx_.MayChange(current->team); !s.ok()) return ArgoError(s);
                 if (Status s = r.service_->DeleteManifest(kind, p.at("name")); !s.ok())
                   return ArgoError(s);
                 return ArgoJson(200, json::object());
               }));
  }
  for (bool suspend : {true, false}) {
    router.Add(
        "PUT",
        std::string("/api/v1/cron-workflows/{ns}/{name}/") + (suspend ? "suspend" : "resume"),
        guarded([suspend](ArgoRoutes& r, auto&, auto& p) {
          auto current = r.service_->GetManifest(kCronWorkflowKind, p.at("name"));
          if (!current.ok()) return ArgoError(current.status());
          if (Status s = r.ctx_.MaySee(current->team); !s.ok()) return ArgoError(s);
          if (Status s = r.ctx_.MayChange(current->team); !s.ok()) return ArgoError(s);
          auto view = r.service_->SuspendCron(p.at("name"), suspend);
          if (!view.ok()) return ArgoError(view.status());
          return ArgoJson(200, view->body);
        }));
  }
  // Argo's ArchivedWorkflowService: finished workflows, found by uid.
  const std::string archive = "/api/v1/archived-workflows";
  router.Add("GET", archive,
             guarded([](ArgoRoutes& r, auto& req, auto&) { return r.List(req, true); }));
  router.Add("GET", archive + "/{uid}", guarded([](ArgoRoutes& r, auto&, auto& p) {
               auto view = r.ArchivedByUid(p.at("uid"));
               if (!view.ok()) return ArgoError(view.status());
               return ArgoJson(200, view->body);
             }));
  router.Add("DELETE", archive + "/{uid}", guarded([](ArgoRoutes& r, auto&, auto& p) {
               return r.OnArchived(p.at("uid"),
                                   [&](const std::string& name) { return r.Delete(name); });
             }));
  router.Add("PUT", archive + "/{uid}/resubmit", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.OnArchived(p.at("uid"),
                                   [&](const std::string& name) { return r.Resubmit(req, name); });
             }));
  router.Add("PUT", archive + "/{uid}/retry", guarded([](ArgoRoutes& r, auto& req, auto& p) {
               return r.OnArchived(p.at("uid"),
                                   [&](const std::string& name) { return r.Retry(req, name); });
             }));
  router.Add("GET", "/api/v1/archived-workflows-label-keys",
             guarded([](ArgoRoutes& r, auto&, auto&) { return r.ArchivedLabels(""); }));
  router.Add(
      "GET", "/api/v1/archived-workflows-label-values",
      guarded([](ArgoRoutes& r, auto& req, auto&) {
        // The key is the selector's only term ("key" or "key=...").
        std::string key = req.Query("listOptions.labelSelector");
        key = key.substr(0, key.find_first_of("=!,"));
        if (key.empty()) {
          return ArgoError(InvalidArgument("listOptions.labelSelector must name a label key"));
        }
        return r.ArchivedLabels(key);
      }));
  router.Add("GET", "/api/v1/cluster-workflow-templates",
             [](auto&, auto&, auto&) { return NotImplemented("ClusterWorkflowTemplates"); });
}

}  // namespace headway::api
