// Workflows at scale, in two parts that print side by side:
//
//  engine  the workflow engine alone (no server, no processes): a 10,000-task
//          DAG (100 layers of 100, each task after two of the layer before)
//          driven to the end with every step's job ending at once: time to
//          the first steps, engine CPU per node over the whole run, passes;
//          and one pass over 5,000 one-step workflows.
//  server  a real `headway server`: N one-step workflows of a trivial command
//          posted over Argo's REST API, then waited for: accepted per second,
//          finished per minute (Argo's published figures for context: 270
//          workflows/min with its default settings, 2,100/min with 5
//          controller shards on 50 nodes), the server's CPU per workflow.
//
//   workflow_bench [--part engine|server|both] [--workflows N] [--bin PATH]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "loopback_server.h"
#include "workflow/engine.h"
#include "workflow/manifest.h"

namespace {

using headway::Duration;
using headway::Time;
namespace wf = headway::workflow;
using Clock = std::chrono::steady_clock;

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

std::string BigDag(int layers, int width) {
  std::string y =
      "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: big}\nspec:\n"
      "  entrypoint: main\n  templates:\n  - name: step\n    container: {image: a, command: "
      "[\"true\"]}\n"
      "  - name: main\n    dag:\n      tasks:\n";
  for (int l = 0; l < layers; ++l) {
    for (int i = 0; i < width; ++i) {
      y += "      - {name: t" + std::to_string(l) + "-" + std::to_string(i) + ", template: step";
      if (l > 0) {
        y += ", dependencies: [t" + std::to_string(l - 1) + "-" + std::to_string(i) + ", t" +
             std::to_string(l - 1) + "-" + std::to_string((i + 1) % width) + "]";
      }
      y += "}\n";
    }
  }
  return y;
}

void EngineBench() {
  const int layers = 100, width = 100;
  auto parsed_start = Clock::now();
  auto manifest = wf::ParseManifest(BigDag(layers, width));
  if (!manifest.ok()) {
    std::fprintf(stderr, "%s\n", manifest.status().ToString().c_str());
    return;
  }
  double parse_s = std::chrono::duration<double>(Clock::now() - parsed_start).count();
  const wf::Workflow& workflow = std::get<wf::Workflow>(manifest->resource);
  wf::WorkflowState state;
  state.name = "big";
  state.uid = "u";
  std::map<std::string, wf::JobObservation> jobs;
  Time now = headway::FromUnixMillis(1'700'000'000'000);
  wf::Environment env;
  env.observe = [&](const std::string& job) -> std::optional<wf::JobObservation> {
    auto it = jobs.find(job);
    if (it == jobs.end()) return std::nullopt;
    return it->second;
  };
  double cpu0 = ProcessCpuSeconds();
  auto t0 = Clock::now();
  double first_step_s = -1;
  int passes = 0;
  std::size_t created = 0;
  for (;;) {
    env.now = now;
    wf::Actions actions = wf::Operate(workflow.spec, state, env);
    ++passes;
    if (first_step_s < 0 && !actions.create.empty()) {
      first_step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    for (const wf::JobToCreate& job : actions.create) {
      wf::JobObservation done;
      done.state = headway::JobState::kSucceeded;
      done.exit_code = 0;
      done.started_at = now;
      done.finished_at = now;
      jobs[job.spec.name] = done;
      ++created;
    }
    now += std::chrono::seconds(1);
    if (state.Finished() || passes > 10 * layers) break;
  }
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = ProcessCpuSeconds() - cpu0;
  std::printf(
      "engine: 10,000-task DAG (%d layers x %d, 19,800 edges): parse %.2f s, first steps "
      "after %.1f ms, %d passes to the end (%s), %zu jobs, %.2f s wall, %.1f us CPU per node "
      "over the run\n",
      layers, width, parse_s, first_step_s * 1000, passes,
      std::string(wf::NodePhaseName(state.phase)).c_str(), created, wall,
      cpu * 1e6 / static_cast<double>(layers * width));

  // 5,000 one-step workflows, one pass each (what accepting them costs the engine).
  auto one = wf::ParseManifest(
      "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: one}\nspec:\n"
      "  entrypoint: s\n  templates:\n  - {name: s, container: {image: a, command: [\"true\"]}}\n");
  const wf::Workflow& single = std::get<wf::Workflow>(one->resource);
  cpu0 = ProcessCpuSeconds();
  for (int i = 0; i < 5000; ++i) {
    wf::WorkflowState s;
    s.name = "one-" + std::to_string(i);
    s.uid = "u";
    env.now = now;
    wf::Operate(single.spec, s, env);
  }
  cpu = ProcessCpuSeconds() - cpu0;
  std::printf("engine: 5,000 one-step workflows, first pass each: %.1f us CPU per workflow\n",
              cpu * 1e6 / 5000);
}

void ServerBench(const std::string& bin, int n) {
  using headway::bench::Connection;
  using headway::bench::ServerProcess;
  namespace http = headway::bench::http;
  ServerProcess server(bin, "headway-wf-bench", {}, 0);
  if (server.port() == 0) return;
  Connection c(server.port());
  double cpu0 = headway::bench::CpuSeconds(server.pid());
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    nlohmann::json body = {
        {"workflow",
         {{"apiVersion", "argoproj.io/v1alpha1"},
          {"kind", "Workflow"},
          {"metadata", {{"name", "w-" + std::to_string(i)}}},
          {"spec",
           {{"entrypoint", "s"},
            {"templates",
             {{{"name", "s"}, {"container", {{"image", "a"}, {"command", {"true"}}}}}}}}}}}};
    auto [status, text] = c.Request(http::verb::post, "/api/v1/workflows/default", body.dump());
    if (status != 200) {
      std::fprintf(stderr, "create %d: %d %s\n", i, status, text.c_str());
      return;
    }
  }
  double accept_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double accept_cpu = headway::bench::CpuSeconds(server.pid()) - cpu0;
  int done = 0;
  for (;;) {
    auto [status, text] =
        c.Request(http::verb::get, "/api/v1/workflows/default?phase=Succeeded", "");
    auto list = nlohmann::json::parse(text, nullptr, false);
    done = list.is_object() ? static_cast<int>(list["items"].size()) : 0;
    if (done >= n) break;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > 3600) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  double cpu = headway::bench::CpuSeconds(server.pid()) - cpu0;
  std::printf(
      "server: %d one-step workflows: accepted in %.1f s (%.0f/s, %.2f ms server CPU "
      "each), all %d finished after %.1f s = %.0f workflows/min (Argo: 270/min default, "
      "2,100/min with 5 shards on 50 nodes); server CPU %.1f ms per workflow in all\n",
      n, accept_s, n / accept_s, accept_cpu * 1000 / n, done, total_s, done * 60 / total_s,
      cpu * 1000 / n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string part = "both", bin = HEADWAY_BIN;
  int n = 5000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--part") part = argv[i + 1];
    if (flag == "--workflows") n = std::stoi(argv[i + 1]);
    if (flag == "--bin") bin = argv[i + 1];
  }
  if (part == "engine" || part == "both") EngineBench();
  if (part == "server" || part == "both") ServerBench(bin, n);
  return 0;
}
