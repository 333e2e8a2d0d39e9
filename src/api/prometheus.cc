#include "api/prometheus.h"

#include <charconv>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

namespace headway::api {
namespace {

constexpr const char* kStates[] = {"Queued", "Starting", "Running",  "Succeeded",
                                   "Failed", "Stopped",  "Preempted"};
constexpr const char* kHealths[] = {"Progressing", "Stalled",     "Diverging",
                                    "Plateaued",   "Overfitting", "Unknown"};

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  // Shortest text that reads back as the same double: 0.08, not 0.080000000000000002.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

// Writes one metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string& out, const char* name, const char* type, const char* help)
      : out_(out), name_(name) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }

  using Labels = std::vector<std::pair<const char*, std::string_view>>;

  void Sample(const Labels& labels, double value) {
    out_ += name_;
    if (!labels.empty()) {
      out_ += '{';
      for (std::size_t i = 0; i < labels.size(); ++i) {
        if (i) out_ += ',';
        out_ += labels[i].first;
        out_ += "=\"";
        out_ += EscapeLabelValue(labels[i].second);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += FormatValue(value);
    out_ += '\n';
  }

 private:
  std::string& out_;
  const char* name_;
};

struct ActiveJob {
  Job job;
  ProgressView progress;
};

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderPrometheus(JobService& service, const ApiCounters& counters,
                             const std::string& team, ArtifactService* artifacts) {
  std::string out;
  std::map<std::string, int> per_state;
  for (const char* s : kStates) per_state[s] = 0;
  std::vector<ActiveJob> active;
  JobFilter filter;
  filter.team = team;
  if (auto jobs = service.List(filter); jobs.ok()) {
    for (Job& job : *jobs) {
      per_state[std::string(JobStateName(job.state))] += 1;
      if (IsTerminal(job.state)) continue;
      ProgressView progress = service.Progress(job);
      active.push_back({std::move(job), std::move(progress)});
    }
  }

  {
    Family f(out, "headway_jobs", "gauge", "Jobs in each state.");
    for (const auto& [state, n] : per_state) f.Sample({{"state", state}}, n);
  }
  {
    Family f(out, "headway_job_state", "gauge",
             "1 for the state an active job is in, 0 for the others.");
    for (const ActiveJob& a : active) {
      std::string_view current = JobStateName(a.job.state);
      for (const char* s : kStates) {
        f.Sample({{"job_name", a.job.name()}, {"team", a.job.spec.team}, {"state", s}},
                 current == s ? 1 : 0);
      }
    }
  }
  {
    Family f(out, "headway_job_health", "gauge",
             "1 for an active job's health verdict, 0 for the others.");
    for (const ActiveJob& a : active) {
      for (const char* h : kHealths) {
        f.Sample({{"job_name", a.job.name()}, {"team", a.job.spec.team}, {"health", h}},
                 HealthName(a.progress.health) == h ? 1 : 0);
      }
    }
  }
  auto per_job = [&](const char* name, const char* type, const char* help, auto value) {
    Family f(out, name, type, help);
    for (const ActiveJob& a : active) {
      std::optional<double> v = value(a);
      if (v) f.Sample({{"job_name", a.job.name()}, {"team", a.job.spec.team}}, *v);
    }
  };
  auto opt = [](const auto& o) -> std::optional<double> {
    return o ? std::optional<double>(static_cast<double>(*o)) : std::nullopt;
  };
  per_job("headway_job_progress_ratio", "gauge", "Fraction of the job done, 0 to 1.",
          [](const ActiveJob& a) -> std::optional<double> {
            return a.progress.percent ? std::optional<double>(*a.progress.percent / 100.0)
                                      : std::nullopt;
          });
  per_job("headway_job_eta_seconds", "gauge", "Estimated seconds until the job ends.",
          [&](const ActiveJob& a) { return opt(a.progress.eta_seconds); });
  per_job("headway_job_step", "gauge", "Latest step the job reported.",
          [&](const ActiveJob& a) { return opt(a.progress.step); });
  per_job("headway_job_total_steps", "gauge", "Steps the job will run in all.",
          [&](const ActiveJob& a) { return opt(a.progress.total_steps); });
  per_job("headway_job_epoch", "gauge", "Latest epoch the job reported.",
          [&](const ActiveJob& a) { return opt(a.progress.epoch); });
  per_job("headway_job_steps_per_second", "gauge", "Recent training speed in steps per second.",
          [&](const ActiveJob& a) { return opt(a.progress.steps_per_second); });
  per_job("headway_job_samples_per_second", "gauge", "Recent throughput in samples per second.",
          [&](const ActiveJob& a) { return opt(a.progress.samples_per_second); });
  per_job("headway_job_last_report_timestamp_seconds", "gauge",
          "Unix time of the job's latest progress report.", [](const ActiveJob& a) {
            return a.progress.last_report_at
                       ? std::optional<double>(ToUnixSeconds(*a.progress.last_report_at))
                       : std::nullopt;
          });
  per_job("headway_job_gpus", "gauge", "GPUs the job asks for (an elastic job: holds now).",
          [](const ActiveJob& a) {
            return std::optional<double>(a.job.spec.elastic && !a.job.gpu_ids.empty()
                                             ? static_cast<int>(a.job.gpu_ids.size())
                                             : a.job.spec.resources.gpus());
          });
  per_job("headway_job_restarts", "gauge", "Times the job was restarted after a failure.",
          [](const ActiveJob& a) { return std::optional<double>(a.job.restarts); });
  {
    Family f(
        out, "headway_job_elastic_steps_per_second", "gauge",
        "Steps per second an elastic job measured at each size (rank groups or nodes) it ran.");
    for (const ActiveJob& a : active) {
      if (!a.job.spec.elastic) continue;
      for (const auto& [size, rate] : service.ElasticOf(a.job.name()).throughput) {
        f.Sample(
            {{"job_name", a.job.name()}, {"team", a.job.spec.team}, {"size", std::to_string(size)}},
            rate);
      }
    }
  }
  {
    Family f(out, "headway_job_metric", "gauge",
             "Latest value of each metric a job reports (loss, eval_loss, learning_rate, ...).");
    for (const ActiveJob& a : active) {
      for (const auto& [metric, value] : a.progress.metrics) {
        f.Sample({{"job_name", a.job.name()}, {"team", a.job.spec.team}, {"metric", metric}},
                 value);
      }
    }
  }

  std::vector<NodeStatus> nodes = service.Nodes();
  int total = 0, allocated = 0;
  for (const NodeStatus& n : nodes) {
    total += n.gpus;
    allocated += n.gpus_in_use;
  }
  Family(out, "headway_gpus", "gauge", "GPUs in the pool.").Sample({}, total);
  Family(out, "headway_gpus_allocated", "gauge", "GPUs held by running jobs.")
      .Sample({}, allocated);
  {
    Family f(out, "headway_node_gpus", "gauge", "GPUs on each node.");
    for (const NodeStatus& n : nodes)
      f.Sample({{"node", n.name}, {"executor", n.executor}}, n.gpus);
  }
  {
    Family f(out, "headway_node_gpus_allocated", "gauge",
             "GPUs held by running jobs on each node.");
    for (const NodeStatus& n : nodes) {
      f.Sample({{"node", n.name}, {"executor", n.executor}}, n.gpus_in_use);
    }
  }

  std::vector<QueueStatus> queues = service.Queues();
  auto per_queue = [&](const char* name, const char* help, auto value) {
    Family f(out, name, "gauge", help);
    for (const QueueStatus& q : queues) {
      std::optional<double> v = value(q);
      if (v) f.Sample({{"queue", q.name}, {"executor", q.executor}}, *v);
    }
  };
  per_queue("headway_queue_pending_jobs", "Jobs waiting in each queue.",
            [](const QueueStatus& q) { return std::optional<double>(q.pending); });
  per_queue("headway_queue_running_jobs", "Jobs running from each queue.",
            [](const QueueStatus& q) { return std::optional<double>(q.running); });
  per_queue("headway_queue_gpus_in_use", "GPUs held by each queue's jobs.",
            [](const QueueStatus& q) { return std::optional<double>(q.gpus_in_use); });
  per_queue("headway_queue_nominal_gpus", "Each team's GPU quota (absent: no quota).",
            [&](const QueueStatus& q) { return opt(q.nominal_gpus); });
  per_queue("headway_queue_borrowing_limit_gpus", "GPUs a team may borrow beyond its quota.",
            [&](const QueueStatus& q) { return opt(q.borrowing_limit); });

  Family(out, "headway_ingest_points_total", "counter",
         "Progress points accepted over HTTP (native and Kubeflow reports).")
      .Sample({}, static_cast<double>(counters.report_points.load()));
  {
    Family f(out, "headway_ingest_requests_total", "counter",
             "Progress report requests, by outcome.");
    f.Sample({{"result", "accepted"}},
             static_cast<double>(counters.report_requests_accepted.load()));
    f.Sample({{"result", "rejected"}},
             static_cast<double>(counters.report_requests_rejected.load()));
  }
  {
    Family f(out, "headway_http_responses_total", "counter", "HTTP responses by status class.");
    static const char* kClasses[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (std::size_t c = 1; c <= 5; ++c) {
      f.Sample({{"code", kClasses[c]}}, static_cast<double>(counters.http_responses[c].load()));
    }
  }
  if (artifacts != nullptr) {
    ArtifactFilter filter;
    filter.team = team;
    if (auto all = artifacts->List(filter); all.ok()) {
      std::map<std::string, double> bytes;
      std::map<std::tuple<std::string, std::string, std::string>, double> versions;
      for (const Artifact& a : *all) {
        bytes[a.team] += static_cast<double>(a.size);
        versions[{a.team, std::string(ArtifactKindName(a.kind)),
                  std::string(ArtifactStateName(a.state))}] += 1;
      }
      Family b(out, "headway_artifact_bytes", "gauge",
               "Bytes of each team's artifact versions (Pending ones included), as its quota "
               "counts them.");
      for (const auto& [t, n] : bytes) b.Sample({{"team", t}}, n);
      Family v(out, "headway_artifact_versions", "gauge",
               "Artifact versions by team, kind and state.");
      for (const auto& [key, n] : versions) {
        const auto& [t, kind, state] = key;
        v.Sample({{"team", t}, {"kind", kind}, {"state", state}}, n);
      }
    }
  }
  return out;
}

}  // namespace headway::api
