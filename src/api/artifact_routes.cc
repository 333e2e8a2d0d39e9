#include "api/artifact_routes.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "api/artifact_json.h"
#include "api/file_stream.h"
#include "api/json_response.h"
#include "api/visible_job.h"

namespace headway::api {
namespace {

using nlohmann::json;

class ArtifactRoutes {
 public:
  explicit ArtifactRoutes(ArtifactRoutesOptions options)
      : artifacts_(options.artifacts),
        jobs_(options.jobs),
        spool_dir_(std::move(options.spool_dir)),
        local_jobs_reach_only_the_server_(options.local_jobs_reach_only_the_server),
        bind_stream_(std::move(options.bind_stream)) {}

  // Who may see and change an artifact: its team's users, or a job of its team.
  static Status MaySeeArtifact(const RequestContext& ctx, const Artifact& a) {
    if (ctx.job()) {
      if (ctx.job()->spec.team == a.team) return Status::Ok();
      return PermissionDenied("job '" + ctx.job()->name() + "' of team '" + ctx.job()->spec.team +
                              "' may not read artifacts of team '" + a.team + "'");
    }
    return ctx.MaySee(a.team);
  }
  static Status MayChangeArtifact(const RequestContext& ctx, const Artifact& a) {
    if (ctx.job()) return MaySeeArtifact(ctx, a);
    return ctx.MayChange(a.team);
  }

  Result<std::optional<std::int64_t>> ParseVersion(const std::string& text) {
    if (text == "latest") return std::optional<std::int64_t>();
    auto ref = ParseArtifactRef("x:" + text);
    if (!ref.ok() || !ref->version) {
      return InvalidArgument("version must be a number from 1 or 'latest', got '" + text + "'");
    }
    return std::optional<std::int64_t>(ref->version);
  }

  // The version named in a path, visible to the caller.
  Result<Artifact> VisibleArtifact(const RequestContext& ctx, const std::string& name,
                                   const std::string& version) {
    auto v = ParseVersion(version);
    if (!v.ok()) return v.status();
    auto a = artifacts_->Get(name, *v);
    if (!a.ok()) return a.status();
    HEADWAY_RETURN_IF_ERROR(MaySeeArtifact(ctx, *a));
    return a;
  }

  HttpResponse CreateArtifact(const RequestContext& ctx, const HttpRequest& req) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    bool multipart = false;
    auto draft = ParseNewArtifact(req.body, &multipart);
    if (!draft.ok()) return ErrorResponse(draft.status());
    if (ctx.job()) {
      // A job's artifacts are its team's, and it is their producer.
      if (!draft->team.empty() && draft->team != ctx.job()->spec.team) {
        return ErrorResponse(PermissionDenied("job '" + ctx.job()->name() +
                                              "' may create artifacts "
                                              "of its team '" +
                                              ctx.job()->spec.team + "' only")
                                 .WithField("team"));
      }
      draft->team = ctx.job()->spec.team;
      draft->producer.job = ctx.job()->name();
      if (!draft->producer.attempt) draft->producer.attempt = ctx.job()->attempt();
      draft->created_by = "job/" + ctx.job()->name();
    } else {
      if (draft->team.empty()) {
        draft->team =
            ctx.caller() && ctx.caller()->team != kEveryTeam && !ctx.caller()->team.empty()
                ? ctx.caller()->team
                : JobSpec().team;
      }
      if (Status s = ctx.MayChange(draft->team); !s.ok()) return ErrorResponse(s);
      if (!draft->producer.job.empty()) {
        // Lineage names only jobs the caller may see.
        if (Status s = VisibleJob(*jobs_, ctx, draft->producer.job).status(); !s.ok())
          return ErrorResponse(s);
      }
      draft->created_by = ctx.Creator();
    }
    const bool direct = !ReachesOnlyTheServer(ctx.job());
    auto created = artifacts_->Create(std::move(draft.value()), multipart && direct, direct);
    if (!created.ok()) return ErrorResponse(created.status());
    json upload = nullptr;
    if (created->multipart) {
      upload = {{"multipart",
                 {{"upload_id", created->multipart->upload_id},
                  {"part_size", created->multipart->part_size},
                  {"part_count", created->multipart->part_count}}}};
    } else if (created->presigned) {
      json headers = json::object();
      for (const auto& [k, v] : created->presigned->headers) headers[k] = v;
      upload = json::object();
      upload["method"] = created->presigned->method;
      upload["url"] = created->presigned->url;
      upload["headers"] = headers;
    } else if (created->upload_through_server) {
      upload = json::object();
      upload["method"] = "PUT";
      upload["url"] = "/api/v1/artifacts/" + created->artifact.name + "/versions/" +
                      std::to_string(created->artifact.version) + "/content";
      upload["headers"] = json::object();
    }
    return JsonResponse(201, {{"artifact", ArtifactToJson(created->artifact)}, {"upload", upload}});
  }

  HttpResponse ListArtifacts(const RequestContext& ctx, const HttpRequest& req) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    ArtifactFilter filter;
    for (const auto& [key, value] : req.query) {
      if (key == "team") {
        filter.team = value;
      } else if (key == "name") {
        filter.name = value;
      } else if (key == "job") {
        filter.job = value;
      } else if (key == "kind") {
        filter.kind = ParseArtifactKind(value);
        if (!filter.kind) {
          return ErrorResponse(InvalidArgument("kind must be checkpoint, model, dataset or output")
                                   .WithField("kind"));
        }
      } else if (key == "ready") {
        filter.ready_only = value == "true" || value == "1";
      } else {
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      }
    }
    // Confined callers see their own team's only.
    const std::string confined = ctx.job() ? ctx.job()->spec.team : ctx.VisibleTeam();
    if (!confined.empty()) {
      if (!filter.team.empty() && filter.team != confined) {
        return ErrorResponse(ctx.MaySee(filter.team));
      }
      filter.team = confined;
    }
    auto all = artifacts_->List(filter);
    if (!all.ok()) return ErrorResponse(all.status());
    json items = json::array();
    for (const Artifact& a : *all) items.push_back(ArtifactToJson(a));
    return JsonResponse(200, {{"artifacts", items}});
  }

  HttpResponse ArtifactVersions(const RequestContext& ctx, const std::string& name) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    ArtifactFilter filter;
    filter.name = name;
    auto all = artifacts_->List(filter);
    if (!all.ok()) return ErrorResponse(all.status());
    if (all->empty()) return ErrorResponse(NotFound("artifact '" + name + "' not found"));
    if (Status s = MaySeeArtifact(ctx, all->front()); !s.ok()) return ErrorResponse(s);
    json items = json::array();
    for (const Artifact& a : *all) items.push_back(ArtifactToJson(a));
    return JsonResponse(200, {{"name", name}, {"team", all->front().team}, {"versions", items}});
  }

  // A version with its lineage: the job that made it (what it ran with and
  // what it read) and the jobs that used it.
  HttpResponse DescribeArtifact(const RequestContext& ctx, const std::string& name,
                                const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    auto a = VisibleArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    json out = ArtifactToJson(*a);
    json lineage = {{"producer", nullptr}, {"inputs", json::array()}, {"used_by", json::array()}};
    if (!a->producer.job.empty()) {
      auto producer = jobs_->Get(a->producer.job);
      if (producer.ok() && ctx.MaySee(producer->spec.team).ok()) {
        lineage["producer"] = {{"job", producer->name()},
                               {"state", JobStateName(producer->state)},
                               {"labels", producer->spec.labels},
                               {"command", producer->spec.command},
                               {"env", producer->spec.env}};
      } else {
        lineage["producer"] = {{"job", a->producer.job}, {"state", nullptr}};  // deleted since
      }
      auto inputs = artifacts_->UsesByJob(a->producer.job);
      if (inputs.ok()) {
        for (const ArtifactUse& u : *inputs) lineage["inputs"].push_back(ArtifactUseToJson(u));
      }
    }
    auto uses = artifacts_->Uses(a->name, a->version);
    if (uses.ok()) {
      for (const ArtifactUse& u : *uses) lineage["used_by"].push_back(ArtifactUseToJson(u));
    }
    out["lineage"] = lineage;
    return JsonResponse(200, out);
  }

  HttpResponse UploadArtifact(const RequestContext& ctx, const HttpRequest& req,
                              const std::string& name, const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    if (req.body_file.empty()) {
      return ErrorResponse(InvalidArgument("send the artifact's bytes as the request body"));
    }
    auto a = VisibleArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    if (Status s = MayChangeArtifact(ctx, *a); !s.ok()) return ErrorResponse(s);
    auto stored = artifacts_->Receive(a->name, a->version, req.body_file);
    if (!stored.ok()) return ErrorResponse(stored.status());
    return JsonResponse(200, ArtifactToJson(*stored));
  }

  // The Pending version a multipart request names, which the caller may change.
  Result<Artifact> ChangeableArtifact(const RequestContext& ctx, const std::string& name,
                                      const std::string& version) {
    auto a = VisibleArtifact(ctx, name, version);
    if (!a.ok()) return a.status();
    HEADWAY_RETURN_IF_ERROR(MayChangeArtifact(ctx, *a));
    return a;
  }

  static Result<std::string> UploadIdField(const json& body) {
    if (!body.contains("upload_id")) return InvalidArgument("is required").WithField("upload_id");
    const json& id = body["upload_id"];
    if (!id.is_string() || id.get<std::string>().empty() || id.get<std::string>().size() > 1024) {
      return InvalidArgument("must be the upload_id the artifact's creation gave")
          .WithField("upload_id");
    }
    return id.get<std::string>();
  }

  HttpResponse CommitArtifact(const RequestContext& ctx, const HttpRequest& req,
                              const std::string& name, const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    std::optional<std::string> upload_id;
    if (!req.body.empty()) {
      json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (!body.is_object()) return ErrorResponse(InvalidArgument("body must be a JSON object"));
      for (const auto& [key, value] : body.items()) {
        if (key != "upload_id") {
          return ErrorResponse(InvalidArgument("unknown field (known: upload_id)").WithField(key));
        }
      }
      if (body.contains("upload_id")) {
        auto id = UploadIdField(body);
        if (!id.ok()) return ErrorResponse(id.status());
        upload_id = *id;
      }
    }
    auto a = ChangeableArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    auto ready = artifacts_->Commit(a->name, a->version, upload_id);
    if (!ready.ok()) return ErrorResponse(ready.status());
    return JsonResponse(200, ArtifactToJson(*ready));
  }

  // GET .../parts?upload_id=ID: the parts of a multipart upload the store
  // holds, so that a client resuming it sends only the others.
  HttpResponse UploadedParts(const RequestContext& ctx, const HttpRequest& req,
                             const std::string& name, const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    std::string upload_id;
    for (const auto& [key, value] : req.query) {
      if (key != "upload_id") {
        return ErrorResponse(InvalidArgument("unknown query parameter '" + key + "'"));
      }
      upload_id = value;
    }
    auto id = UploadIdField(json{{"upload_id", upload_id}});
    if (!id.ok()) return ErrorResponse(id.status());
    auto a = ChangeableArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    auto parts = artifacts_->UploadedParts(a->name, a->version, *id);
    if (!parts.ok()) return ErrorResponse(parts.status());
    json items = json::array();
    for (const UploadedPart& p : *parts) {
      items.push_back({{"number", p.number}, {"size", p.size}, {"etag", p.etag}});
    }
    return JsonResponse(200, {{"upload_id", *id}, {"parts", items}});
  }

  // POST .../parts {"upload_id", "parts": [{"number", "content_md5"}]}:
  // a presigned request for each part, bound to its size and MD5.
  HttpResponse PresignParts(const RequestContext& ctx, const HttpRequest& req,
                            const std::string& name, const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    constexpr std::size_t kMaxPartsPerRequest = 1000;
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object()) return ErrorResponse(InvalidArgument("body must be a JSON object"));
    for (const auto& [key, value] : body.items()) {
      if (key != "upload_id" && key != "parts") {
        return ErrorResponse(
            InvalidArgument("unknown field (known: upload_id, parts)").WithField(key));
      }
    }
    auto id = UploadIdField(body);
    if (!id.ok()) return ErrorResponse(id.status());
    const json& items = body.contains("parts") ? body["parts"] : json();
    if (!items.is_array() || items.empty() || items.size() > kMaxPartsPerRequest) {
      return ErrorResponse(InvalidArgument("must be a list of 1 to " +
                                           std::to_string(kMaxPartsPerRequest) + " parts")
                               .WithField("parts"));
    }
    std::vector<PartToSend> parts;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& item = items[i];
      const std::string field = "parts[" + std::to_string(i) + "]";
      if (!item.is_object() || !item.contains("number") || !item["number"].is_number_integer() ||
          !item.contains("content_md5") || !item["content_md5"].is_string() || item.size() != 2) {
        return ErrorResponse(
            InvalidArgument("must be {\"number\": N, \"content_md5\": BASE64}").WithField(field));
      }
      const std::int64_t number = item["number"].get<std::int64_t>();
      const std::string md5 = item["content_md5"].get<std::string>();
      if (!IsValidContentMd5(md5)) {
        return ErrorResponse(InvalidArgument("must be a base64 MD5 (24 characters)")
                                 .WithField(field + ".content_md5"));
      }
      if (number < 1 || number > 10000) {
        return ErrorResponse(InvalidArgument("must be 1..10000").WithField(field + ".number"));
      }
      parts.push_back({static_cast<int>(number), md5});
    }
    auto a = ChangeableArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    auto requests = artifacts_->PresignParts(a->name, a->version, *id, parts);
    if (!requests.ok()) return ErrorResponse(requests.status());
    json out = json::array();
    for (std::size_t i = 0; i < requests->size(); ++i) {
      json headers = json::object();
      for (const auto& [k, v] : (*requests)[i].headers) headers[k] = v;
      out.push_back({{"number", parts[i].number},
                     {"method", (*requests)[i].method},
                     {"url", (*requests)[i].url},
                     {"headers", headers}});
    }
    return JsonResponse(200, {{"parts", out}});
  }

  HttpResponse DownloadArtifact(const RequestContext& ctx, const std::string& name,
                                const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    auto a = VisibleArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    std::optional<ArtifactUse> use;
    if (ctx.job())
      use = ArtifactUse{a->name, a->version, ctx.job()->name(), ctx.job()->attempt(), {}};
    auto download = artifacts_->Open(a->name, a->version, use);
    if (!download.ok()) return ErrorResponse(download.status());
    if (download->presigned && !ReachesOnlyTheServer(ctx.job())) {
      HttpResponse r{
          307, "application/json", JsonText({{"url", download->presigned->url}}), {}, nullptr};
      r.headers.emplace_back("Location", download->presigned->url);
      return r;
    }
    std::shared_ptr<FileStream> file;
    if (download->local_path) {
      file = FileStream::Open(*download->local_path);
    } else if (!spool_dir_.empty()) {
      // Through the server, for a job that cannot reach the object store:
      // a private copy, unlinked once open (gone when the answer is sent).
      std::string spooled = spool_dir_ + "/download-XXXXXX";
      int fd = ::mkstemp(spooled.data());
      if (fd < 0) return ErrorResponse(Unavailable("cannot spool " + a->Ref()));
      ::close(fd);
      Status fetched = artifacts_->Fetch(a->name, a->version, spooled, std::nullopt);
      if (fetched.ok()) file = FileStream::Open(spooled);
      ::unlink(spooled.c_str());
      if (!fetched.ok()) return ErrorResponse(fetched);
    }
    if (!file && !download->local_path) {
      return ErrorResponse(Unavailable("the artifact store cannot serve it"));
    }
    if (!file) return ErrorResponse(Unavailable("cannot read the bytes of " + a->Ref()));
    HttpResponse r{200, "application/octet-stream", "", {}, nullptr};
    r.headers.emplace_back("X-Headway-Digest", a->digest);
    r.headers.emplace_back("X-Headway-Size", std::to_string(a->size));
    return bind_stream_(ctx, std::move(r), std::move(file));
  }

  HttpResponse DeleteArtifact(const RequestContext& ctx, const std::string& name,
                              const std::string& version) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    if (version == "latest") {
      return ErrorResponse(InvalidArgument("name the version to delete (NAME:N), not 'latest'"));
    }
    auto a = VisibleArtifact(ctx, name, version);
    if (!a.ok()) return ErrorResponse(a.status());
    if (Status s = MayChangeArtifact(ctx, *a); !s.ok()) return ErrorResponse(s);
    if (Status s = artifacts_->Delete(a->name, a->version); !s.ok()) return ErrorResponse(s);
    return JsonResponse(200, {{"deleted", a->Ref()}});
  }

  HttpResponse JobArtifacts(const RequestContext& ctx, const std::string& job_name) {
    if (!artifacts_) return ErrorResponse(Unavailable("artifacts are not enabled"));
    if (Status s = CheckJobVisible(*jobs_, ctx, job_name); !s.ok()) return ErrorResponse(s);
    ArtifactFilter produced;
    produced.job = job_name;
    auto made = artifacts_->List(produced);
    if (!made.ok()) return ErrorResponse(made.status());
    auto used = artifacts_->UsesByJob(job_name);
    if (!used.ok()) return ErrorResponse(used.status());
    json out = {{"job", job_name}, {"produced", json::array()}, {"used", json::array()}};
    for (const Artifact& a : *made) out["produced"].push_back(ArtifactToJson(a));
    for (const ArtifactUse& u : *used) out["used"].push_back(ArtifactUseToJson(u));
    return JsonResponse(200, out);
  }

  // Whether the calling job's network reaches only this server (a local
  // job on its own network): it cannot reach a presigned URL.
  bool ReachesOnlyTheServer(const Job* job) const {
    return job != nullptr && local_jobs_reach_only_the_server_ && job->executor == "local" &&
           !job->spec.host_network;
  }

  ArtifactService* artifacts_;
  JobService* jobs_;
  const std::string spool_dir_;
  const bool local_jobs_reach_only_the_server_;
  std::function<HttpResponse(const RequestContext&, HttpResponse, std::shared_ptr<ResponseStream>)>
      bind_stream_;
};

}  // namespace

void AddArtifactRoutes(Router& router, ArtifactRoutesOptions options) {
  auto routes = std::make_shared<ArtifactRoutes>(std::move(options));
  router.Add("POST", "/api/v1/artifacts",
             [routes](auto& r, auto&, auto& ctx) { return routes->CreateArtifact(ctx, r); });
  router.Add("GET", "/api/v1/artifacts",
             [routes](auto& r, auto&, auto& ctx) { return routes->ListArtifacts(ctx, r); });
  router.Add("GET", "/api/v1/artifacts/{name}", [routes](auto&, auto& p, auto& ctx) {
    return routes->ArtifactVersions(ctx, p.at("name"));
  });
  router.Add("GET", "/api/v1/artifacts/{name}/versions/{version}",
             [routes](auto&, auto& p, auto& ctx) {
               return routes->DescribeArtifact(ctx, p.at("name"), p.at("version"));
             });
  router.Add("PUT", "/api/v1/artifacts/{name}/versions/{version}/content",
             [routes](auto& r, auto& p, auto& ctx) {
               return routes->UploadArtifact(ctx, r, p.at("name"), p.at("version"));
             });
  router.Add("POST", "/api/v1/artifacts/{name}/versions/{version}/commit",
             [routes](auto& r, auto& p, auto& ctx) {
               return routes->CommitArtifact(ctx, r, p.at("name"), p.at("version"));
             });
  router.Add("GET", "/api/v1/artifacts/{name}/versions/{version}/parts",
             [routes](auto& r, auto& p, auto& ctx) {
               return routes->UploadedParts(ctx, r, p.at("name"), p.at("version"));
             });
  router.Add("POST", "/api/v1/artifacts/{name}/versions/{version}/parts",
             [routes](auto& r, auto& p, auto& ctx) {
               return routes->PresignParts(ctx, r, p.at("name"), p.at("version"));
             });
  router.Add("GET", "/api/v1/artifacts/{name}/versions/{version}/content",
             [routes](auto&, auto& p, auto& ctx) {
               return routes->DownloadArtifact(ctx, p.at("name"), p.at("version"));
             });
  router.Add("DELETE", "/api/v1/artifacts/{name}/versions/{version}",
             [routes](auto&, auto& p, auto& ctx) {
               return routes->DeleteArtifact(ctx, p.at("name"), p.at("version"));
             });
  router.Add("GET", "/api/v1/jobs/{name}/artifacts", [routes](auto&, auto& p, auto& ctx) {
    return routes->JobArtifacts(ctx, p.at("name"));
  });
}

bool IsArtifactPath(std::string_view path) {
  return path == "/api/v1/artifacts" || path.starts_with("/api/v1/artifacts/");
}

}  // namespace headway::api
