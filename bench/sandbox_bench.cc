// What isolating a local attempt costs: runs the per-attempt supervisor
// (`headway shim RUN_DIR`) for a one-rank job that runs /bin/true, plain and
// with each layer of isolation, and prints the wall time of the whole
// attempt (supervisor start to result recorded) side by side.
//
//   build/bench/sandbox_bench [RUNS]     (as root for the cgroup rows)
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/local/cgroup.h"
#include "exec/local/sandbox.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

double RunShim(const std::string& run_dir) {
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    execl(HEADWAY_BIN, HEADWAY_BIN, "shim", run_dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  json result = json::parse(std::ifstream(run_dir + "/result.json"), nullptr, false);
  if (!result.is_object() || result.value("exit_code", -1) != 0) {
    std::ifstream log(run_dir + "/rank-0.log");
    std::fprintf(stderr, "attempt failed: %s\n%s\n", result.dump().c_str(),
                 std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    std::exit(1);
  }
  fs::remove(run_dir + "/result.json");
  return ms;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 100;
  fs::path base = fs::temp_directory_path() / ("headway-sandbox-bench-" + std::to_string(getpid()));
  fs::path data = base / "data", run = data / "jobs" / "bench" / "attempt-0";
  fs::path checkpoints = data / "jobs" / "bench" / "checkpoints";
  fs::create_directories(run);
  fs::create_directories(checkpoints);
  auto cgroups = headway::internal::CgroupManager::Detect();
  std::printf("%s\n", cgroups.Describe().c_str());

  struct Variant {
    const char* name;
    bool cgroup, sandbox;
  };
  std::vector<Variant> variants = {{"plain process group", false, false},
                                   {"cgroup", true, false},
                                   {"namespaces", false, true},
                                   {"cgroup + namespaces", true, true}};
  std::printf("%-22s %10s %10s %10s %8s\n", "attempt", "p50 ms", "p95 ms", "mean ms", "x plain");
  double plain_p50 = 0;
  for (const Variant& v : variants) {
    if (v.cgroup && !cgroups.usable()) {
      std::printf("%-22s %10s\n", v.name, "n/a");
      continue;
    }
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
      // The supervisor removes the attempt's cgroup when it is done; each
      // run makes its own, as a launch does (and that is timed too).
      auto start = std::chrono::steady_clock::now();
      std::vector<std::string> warnings;
      headway::internal::AttemptCgroup cg;
      if (v.cgroup) {
        auto created = cgroups.Create("bench.attempt-0", {}, warnings);
        if (!created.ok()) {
          std::printf("%-22s %s\n", v.name, created.status().message().c_str());
          return 1;
        }
        cg = *created;
      }
      json launch = {{"ranks", json::array({{{"rank", 0},
                                             {"argv", {"/bin/true"}},
                                             {"env", {"PATH=/usr/bin:/bin"}},
                                             {"cwd", "/"},
                                             {"log", (run / "rank-0.log").string()}}})},
                     {"cgroup", cg.ToJson()}};
      if (v.sandbox) {
        headway::internal::SandboxPlan plan;
        plan.hidden = {data.string()};
        plan.exposed = {checkpoints.string()};
        launch["sandbox"] = plan.ToJson();
      }
      std::ofstream(run / "launch.json") << launch.dump();
      double setup =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      ms.push_back(setup + RunShim(run.string()));
    }
    double p50 = Percentile(ms, 0.5);
    if (plain_p50 == 0) plain_p50 = p50;
    double mean = 0;
    for (double x : ms) mean += x / static_cast<double>(ms.size());
    std::printf("%-22s %10.2f %10.2f %10.2f %8.2f\n", v.name, p50, Percentile(ms, 0.95), mean,
                p50 / plain_p50);
  }
  fs::remove_all(base);
}
