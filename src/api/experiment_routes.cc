#include "api/experiment_routes.h"

#include <nlohmann/json.hpp>
#include <string>

#include "api/job_json.h"
#include "api/json_response.h"
#include "api/request_context.h"

namespace headway::api {
namespace {

using nlohmann::json;

// An experiment belongs to the team its trials run in.
std::string TeamOf(const ExperimentView& e) {
  if (!e.spec.is_object() || !e.spec.contains("trial_template")) return JobSpec().team;
  return e.spec["trial_template"].value("team", JobSpec().team);
}

}  // namespace

void AddExperimentRoutes(Router& router, ExperimentService* experiments) {
  router.Add("POST", "/api/v1/experiments", [experiments](auto& r, auto&, auto& ctx) {
    if (!experiments) return ErrorResponse(Unavailable("experiments are not enabled"));
    auto e = experiments->CreateExperiment(r.body, r.Header("x-headway-submit-dir"),
                                           [&ctx](JobSpec& spec) { return ctx.Admit(spec); });
    if (!e.ok()) return ErrorResponse(e.status());
    return JsonResponse(201, ExperimentToJson(*e, true));
  });
  router.Add("GET", "/api/v1/experiments", [experiments](auto&, auto&, auto& ctx) {
    if (!experiments) return ErrorResponse(Unavailable("experiments are not enabled"));
    auto all = experiments->ListExperiments();
    if (!all.ok()) return ErrorResponse(all.status());
    json items = json::array();
    for (const ExperimentView& e : *all) {
      if (ctx.MaySee(TeamOf(e)).ok()) items.push_back(ExperimentToJson(e, false));
    }
    return JsonResponse(200, {{"experiments", items}});
  });
  router.Add("GET", "/api/v1/experiments/{name}", [experiments](auto&, auto& p, auto& ctx) {
    if (!experiments) return ErrorResponse(Unavailable("experiments are not enabled"));
    auto e = experiments->GetExperiment(p.at("name"));
    if (!e.ok()) return ErrorResponse(e.status());
    if (Status s = ctx.MaySee(TeamOf(*e)); !s.ok()) return ErrorResponse(s);
    return JsonResponse(200, ExperimentToJson(*e, true));
  });
  router.Add("POST", "/api/v1/experiments/{name}/stop", [experiments](auto&, auto& p, auto& ctx) {
    if (!experiments) return ErrorResponse(Unavailable("experiments are not enabled"));
    if (ctx.caller()) {
      auto current = experiments->GetExperiment(p.at("name"));
      if (!current.ok()) return ErrorResponse(current.status());
      if (Status s = ctx.MayChange(TeamOf(*current)); !s.ok()) return ErrorResponse(s);
    }
    auto e = experiments->StopExperiment(p.at("name"));
    if (!e.ok()) return ErrorResponse(e.status());
    return JsonResponse(200, ExperimentToJson(*e, true));
  });
  // DELETE /api/v1/experiments/NAME: an ended experiment, with its trials.
  router.Add("DELETE", "/api/v1/experiments/{name}", [experiments](auto& r, auto& p, auto& ctx) {
    if (!experiments) return ErrorResponse(Unavailable("experiments are not enabled"));
    if (!r.query.empty()) {
      return ErrorResponse(
          InvalidArgument("unknown query parameter '" + r.query.begin()->first + "'"));
    }
    auto current = experiments->GetExperiment(p.at("name"));
    if (!current.ok()) return ErrorResponse(current.status());
    if (Status s = ctx.MaySee(TeamOf(*current)); !s.ok()) return ErrorResponse(s);
    if (Status s = ctx.MayChange(TeamOf(*current)); !s.ok()) return ErrorResponse(s);
    auto e = experiments->DeleteExperiment(p.at("name"));
    if (!e.ok()) return ErrorResponse(e.status());
    return JsonResponse(200, {{"name", e->record.name},
                              {"deleted", true},
                              {"trials", e->trials.size()},
                              {"message", "deleted with its trials' jobs and records"}});
  });
}

}  // namespace headway::api
