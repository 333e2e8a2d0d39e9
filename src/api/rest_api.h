// The REST API (docs/api/openapi.yaml): routes requests to the JobService and
// turns every failure into a JSON error with the matching HTTP status. Also
// serves the dashboard (api/dashboard.h), the server-sent event streams it
// follows (api/watch.h) and Prometheus metrics (api/prometheus.h).
#pragma once

#include <string>
#include <string_view>

#include "api/artifact_service.h"
#include "api/experiment_service.h"
#include "api/http_server.h"
#include "api/job_service.h"
#include "api/notebook_service.h"
#include "api/request_guard.h"
#include "api/token_service.h"
#include "api/watch_cache.h"
#include "api/workflow_service.h"
#include "core/team_policy.h"

namespace headway::api {

struct RestApiOptions {
  // Without it the experiment routes answer 503.
  ExperimentService* experiments = nullptr;
  // Without it the artifact routes answer 503.
  ArtifactService* artifacts = nullptr;
  // Without it the Argo workflow routes (api/argo_routes.h) answer 503.
  WorkflowService* workflows = nullptr;
  // Without it the notebook routes and /notebooks/ (api/notebook_routes.h) answer 503.
  NotebookService* notebooks = nullptr;
  // The API is served over HTTPS: cookies it sets are Secure.
  bool tls = false;
  // With it, authentication is on: every route except GET /healthz, the
  // dashboard's files and the jobs' own progress reports needs
  // "Authorization: Bearer <user token>" (401 without a valid one, or an
  // expired one), and the token's role decides what it may change (403).
  // Without it, anyone who can reach the port may do anything.
  TokenService* tokens = nullptr;
  // Which Host and Origin headers are accepted (api/request_guard.h); every
  // request but GET /healthz is checked, refusals are 403.
  HostPolicy hosts;
  // Non-empty: notebook NAME is served at the origin NAME.DOMAIN alone
  // (api/notebook_routes.h, NotebookOrigin); a browser that asks the
  // server's own origin for it is sent there. Also a host name hosts accept.
  std::string notebook_domain;
  // Serve the dashboard from this folder instead of the copy built in.
  std::string web_dir;
  // Bounds on the specs members submit (jobs and experiment trial templates);
  // a spec above them is refused with 400. Only with `tokens`: without
  // authentication every caller acts as the admin, who is not bounded.
  TeamPolicy team_policy;
  // What the jobs streams read (api/watch_cache.h). Without one the API
  // makes its own, which then lists the active jobs once a second.
  WatchCache* watch_cache = nullptr;
  // Event and log streams one user token may hold open at once, its
  // dashboard sessions included (they count as their owner); more get 429.
  // Open streams re-check their token every few seconds and end once it is
  // revoked or expired. Only with `tokens`.
  int max_streams_per_token = 32;
  // The user tokens (by name) that may start JupyterHub users' servers
  // (a notebook start with "jupyterhub": what HeadwaySpawner sends). Only
  // with `tokens`; no one else may, so a member cannot start a server under
  // another hub user's name.
  std::vector<std::string> jupyterhub_spawners;
  // Local jobs run on a network of their own that reaches only this server
  // (exec/local/job_network.h): their artifact bytes go through the server,
  // never to a presigned URL of the object store. `spool_dir` (private to
  // the server) holds a download while it is sent.
  bool local_jobs_reach_only_the_server = false;
  // How many jobs of one team may wait at once before a member's next
  // submit is refused (429): one member's loop of submissions cannot fill
  // the queue for everyone. Admins are not bounded; 0: no bound.
  int max_queued_jobs_per_team = 0;
  std::string spool_dir;
};

// Whether a request uploads an artifact's bytes: what the HTTP server
// writes to a file instead of memory (HttpServerOptions::body_to_file).
bool IsArtifactUpload(std::string_view method, std::string_view path);

// Whether a request is a native progress report, whose handler returns at
// once and answers later (HttpResponse::deferred), after its group commit.
bool DefersItsAnswer(std::string_view method, std::string_view path);

// Whether a request is a job's own progress report (the native and the
// Kubeflow endpoint): what the HTTP server's reserved connections serve.
bool IsJobReport(std::string_view method, std::string_view path);

// The services must outlive the handler.
HttpHandler MakeRestApi(JobService& service, const RestApiOptions& options = {});

}  // namespace headway::api
