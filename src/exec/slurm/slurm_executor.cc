#include "exec/slurm/slurm_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "core/terminal_text.h"
#include "exec/attached_command.h"
#include "exec/command_runner.h"

namespace headway {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

constexpr auto kCommandTimeout = seconds(30);
// For the cleanup after a hang-up, which holds one of the server's threads.
constexpr auto kStepTimeout = seconds(5);

// Single-quoted for bash: safe for any value.
std::string Quote(const std::string& s) { return ShellQuote(s); }

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "TERM";
    case SIGKILL:
      return "KILL";
    case SIGUSR1:
      return "USR1";
    case SIGUSR2:
      return "USR2";
    case SIGINT:
      return "INT";
    default:
      return std::to_string(sig);
  }
}

class SlurmExecutor final : public Executor {
 public:
  SlurmExecutor(CommandRunner& runner, std::uint64_t max_log_bytes, std::string self_executable)
      : runner_(runner), max_log_bytes_(max_log_bytes), self_(std::move(self_executable)) {}

  std::string_view Name() const override { return "slurm"; }

  Status Admit(const JobSpec& spec) const override {
    if (!spec.image.empty()) {
      return InvalidArgument(
                 "jobs in images run on the local executor only, not yet on a Slurm "
                 "queue: drop image: or submit to a local queue")
          .WithField("image");
    }
    if (spec.elastic) {
      return InvalidArgument(
                 "elastic jobs run on the local executor only, not yet on a Slurm "
                 "queue: drop elastic: or submit to a local queue")
          .WithField("elastic");
    }
    return Status::Ok();
  }
  bool EnforcesTimeLimit() const override { return true; }
  // One scontrol per job every 2 s keeps slurmctld's load negligible (its
  // default MessageTimeout is 10 s) while state changes show up promptly.
  Duration PollInterval() const override { return std::chrono::seconds(2); }

  Result<Launched> Launch(const LaunchRequest& request) override {
    std::error_code ec;
    fs::create_directories(request.run_dir, ec);
    if (ec) return Unavailable("cannot create " + request.run_dir + ": " + ec.message());
    const JobSpec& spec = request.spec;
    const Resources& r = spec.resources;
    std::string cwd = spec.working_dir.empty() ? request.run_dir : spec.working_dir;

    std::string script = "#!/bin/bash\n";
    script += "#SBATCH --job-name=" + Quote("headway-" + spec.name) + "\n";
    script += "#SBATCH --nodes=" + std::to_string(r.nodes) + "\n";
    script += "#SBATCH --ntasks-per-node=" + std::to_string(r.processes_per_node) + "\n";
    if (r.gpus_per_process > 0) {
      script +=
          "#SBATCH --gres=gpu:" + std::to_string(r.gpus_per_process * r.processes_per_node) + "\n";
    }
    if (spec.time_limit) {
      auto minutes = (std::chrono::duration_cast<seconds>(*spec.time_limit).count() + 59) / 60;
      script += "#SBATCH --time=" + std::to_string(std::max<std::int64_t>(1, minutes)) + "\n";
      if (spec.checkpoint_warning) {
        auto warn = std::chrono::duration_cast<seconds>(*spec.checkpoint_warning).count();
        script += "#SBATCH --signal=USR1@" + std::to_string(std::max<std::int64_t>(1, warn)) + "\n";
      }
    }
    for (const char* key : {"partition", "account", "qos"}) {
      auto it = request.queue_options.find(key);
      if (it != request.queue_options.end() && !it->second.empty()) {
        script += std::string("#SBATCH --") + key + "=" + Quote(it->second) + "\n";
      }
    }
    script += "#SBATCH --output=" + Quote(request.run_dir + "/batch.log") + "\n";
    script += "#SBATCH --chdir=" + Quote(cwd) + "\n\n";
    // The job's environment, in a file of its own (it holds the job's
    // report token: readable by the job's account only) that commands run
    // inside the job later (`headway exec`) read as well.
    const std::string env_path = request.run_dir + "/job-env.sh";
    {
      std::string env;
      for (const auto& [k, v] : spec.env) env += "export " + k + "=" + Quote(v) + "\n";
      for (const auto& [k, v] : request.platform_env) env += "export " + k + "=" + Quote(v) + "\n";
      env += "export HEADWAY_ATTEMPT=" + std::to_string(request.attempt) + "\n";
      env += "export LOCAL_WORLD_SIZE=" + std::to_string(r.processes_per_node) + "\n";
      // A persistent home (notebooks') is the job's HOME on every node; the
      // data directory is shared with the nodes, as the run directory is.
      if (spec.persistent_home && !request.job_home.empty()) {
        env += "export HOME=" + Quote(request.job_home) + "\n";
      }
      int fd =
          ::open(env_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd < 0) return Unavailable("cannot write " + env_path + ": " + std::strerror(errno));
      const bool written = ::write(fd, env.data(), env.size()) == static_cast<ssize_t>(env.size());
      ::close(fd);
      if (!written) return Unavailable("cannot write " + env_path);
    }
    script += ". " + Quote(env_path) + "\n";
    // Which Slurm job this attempt became, for recovery (FindLaunched).
    script += "echo \"$SLURM_JOB_ID\" > " + Quote(request.run_dir + "/slurm-job-id") + "\n";
    // torchrun-style rendezvous: the first node of the allocation, by address.
    script +=
        "first=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n1)\n"
        "addr=$(scontrol show node \"$first\" -o | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)\n"
        "export MASTER_ADDR=${addr:-$first}\n"
        "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))\n"
        "export WORLD_SIZE=$SLURM_NTASKS\n"
        // torchrun's defaults, as Kubeflow's torch runtime sets them.
        "export PET_MASTER_ADDR=${PET_MASTER_ADDR:-$MASTER_ADDR} "
        "PET_MASTER_PORT=${PET_MASTER_PORT:-$MASTER_PORT}\n";
    std::string argv;
    for (const auto& a : spec.Argv()) argv += " " + Quote(a);
    // Each task derives its rank from SLURM_* and execs the job's command.
    const std::string env =
        "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID NODE_RANK=$SLURM_NODEID "
        "GROUP_RANK=$SLURM_NODEID PET_NODE_RANK=${PET_NODE_RANK:-$SLURM_NODEID}; ";
    // Each rank's output goes through awk, which writes rank-N.log and its
    // times file (core/log_times.h; whole seconds: what mawk's clock
    // gives) and, with a log limit, moves both to rank-N.log.1 each time
    // the log passes half the limit, as the local executor's supervisor
    // does: the newest output is kept and no rank can fill the shared disk.
    // The command's exit status is kept.
    const std::string rotate = request.run_dir + "/rank-log.awk";
    {
      std::ofstream out(rotate, std::ios::trunc);
      out << "# Appends each line to f, noting in f.times when the time moved on, and\n"
             "# moves f (and f.times) to f.1 once it holds `half` bytes (0: never).\n"
             "{ t = systime();\n"
             "  if (t != last) { printf \"%d %d000\\n\", n, t > (f \".times\"); "
             "fflush(f \".times\"); last = t }\n"
             "  print > f; fflush(f); n += length($0) + 1;\n"
             "  if (half > 0 && n >= half) { close(f); close(f \".times\");\n"
             "    system(\"mv -f '\" f \"' '\" f \".1' && mv -f '\" f \".times' '\" f "
             "\".1.times'\");\n"
             "    n = 0; last = -1 } }\n";
      if (!out) return Unavailable("cannot write " + rotate);
    }
    const std::uint64_t half =
        max_log_bytes_ == 0 ? 0 : std::max<std::uint64_t>(1, max_log_bytes_ / 2);
    // The paths reach the task's shell as variables: no quoting inside quoting.
    script += "export HEADWAY_RUN_DIR=" + Quote(request.run_dir) + "\n";
    // Slurm signals every process of the step (--signal, scancel, the
    // time limit): the command gets them as it would alone; this shell
    // outlives them to pass on its status, and awk ignores them so that
    // the command's last output is still written. mawk (Debian's awk) reads
    // a pipe in blocks unless told -W interactive: without it a line would
    // reach the log (and `logs -f`) only once 4 KiB more had come.
    script += "srun --kill-on-bad-exit=1 --output=/dev/null /bin/bash -c '" + env +
              "log=\"$HEADWAY_RUN_DIR/rank-$SLURM_PROCID.log\"; : > \"$log\"; : > \"$log.times\"; "
              "lines=; case \"$(awk -W version 2>&1)\" in mawk*) lines=\"-W interactive\";; esac; "
              "trap : USR1 USR2 TERM INT HUP; "
              "\"$@\" 2>&1 | (trap \"\" USR1 USR2 TERM INT HUP; LC_ALL=C exec awk $lines -v "
              "f=\"$log\" -v half=" +
              std::to_string(half) +
              " -f \"$HEADWAY_RUN_DIR/rank-log.awk\"); exit ${PIPESTATUS[0]}' headway-rank" + argv +
              "\n";
    script += "rc=$?\n";
    script += "printf '{\"exit_code\": %d}' \"$rc\" > " +
              Quote(request.run_dir + "/result.json.tmp") + " && mv " +
              Quote(request.run_dir + "/result.json.tmp") + " " +
              Quote(request.run_dir + "/result.json") + "\n";
    script += "exit $rc\n";

    std::string script_path = request.run_dir + "/job.sbatch";
    {
      std::ofstream out(script_path, std::ios::trunc);
      out << script;
      if (!out) return Unavailable("cannot write " + script_path);
    }
    ::chmod(script_path.c_str(), 0700);  // it holds the job's report token

    CommandOutput submitted = runner_.Run({"sbatch", "--parsable", script_path}, kCommandTimeout);
    if (submitted.exit_code != 0) {
      return Unavailable("sbatch failed: " +
                         (submitted.err.empty() ? submitted.out : submitted.err));
    }
    std::string id = submitted.out.substr(0, submitted.out.find_first_of(";\n"));
    if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
      return Internal("sbatch printed no job id: " + submitted.out);
    }
    return LaunchedAs(id, request);
  }

  // After a crash between sbatch and the server storing the job id. While
  // Slurm knows the job, squeue shows this attempt's own batch script
  // (run_dir/job.sbatch, unique per attempt) as its command; once it ran,
  // the script left its id in the run directory. Without either, sbatch
  // never took it. If slurmctld cannot be asked, that is an error: the
  // caller asks again later rather than submit the attempt a second time.
  Result<std::optional<Launched>> FindLaunched(const LaunchRequest& request) override {
    std::string id;
    std::ifstream recorded(request.run_dir + "/slurm-job-id");
    if (recorded >> id && IsJobId(id)) return std::optional<Launched>(LaunchedAs(id, request));
    const std::string script = request.run_dir + "/job.sbatch";
    if (!fs::exists(script)) return std::optional<Launched>();
    CommandOutput listed = runner_.Run(
        {"squeue", "--noheader", "--name=headway-" + request.spec.name, "--format=%i %o"},
        kCommandTimeout);
    if (listed.exit_code != 0) {
      return Unavailable(
          "cannot ask Slurm whether it took " + script + ": squeue: " +
          (listed.err.empty() ? "exit code " + std::to_string(listed.exit_code) : listed.err));
    }
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream fields(line);
      std::string command;
      if (fields >> id >> command && IsJobId(id) && command == script) {
        return std::optional<Launched>(LaunchedAs(id, request));
      }
    }
    return std::optional<Launched>();
  }

  static bool IsJobId(const std::string& id) {
    return !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
  }

  static Launched LaunchedAs(const std::string& id, const LaunchRequest& request) {
    Launched launched;
    const JobSpec& spec = request.spec;
    launched.handle = json{{"slurm_job_id", id},
                           {"run_dir", request.run_dir},
                           {"ranks_per_node", spec.resources.processes_per_node},
                           {"ranks", spec.resources.processes()},
                           {"cwd", spec.working_dir.empty() ? request.run_dir : spec.working_dir}}
                          .dump();
    launched.description = "Slurm job " + id;
    for (int rank = 0; rank < request.spec.resources.processes(); ++rank) {
      launched.logs.push_back({rank, request.run_dir + "/rank-" + std::to_string(rank) + ".log"});
    }
    return launched;
  }

  // The batch host's address (NodeAddr), where the job's rank 0 runs.
  Result<std::string> PrimaryHost(const std::string& handle_text) override {
    auto handle = json::parse(handle_text, nullptr, false);
    if (!handle.is_object() || !handle.contains("slurm_job_id")) {
      return InvalidArgument("unreadable executor handle");
    }
    std::string id = handle["slurm_job_id"].get<std::string>();
    CommandOutput shown = runner_.Run({"scontrol", "show", "job", id, "-o"}, kCommandTimeout);
    auto info = shown.exit_code == 0 ? ParseScontrolJob(shown.out) : std::nullopt;
    if (!info || info->batch_host.empty()) {
      return Unavailable("Slurm job " + id + " has no batch host yet");
    }
    CommandOutput node =
        runner_.Run({"scontrol", "show", "node", info->batch_host, "-o"}, kCommandTimeout);
    static const std::regex addr(R"((?:^|\s)NodeAddr=(\S+))");
    std::smatch m;
    if (node.exit_code == 0 && std::regex_search(node.out, m, addr)) return std::string(m[1]);
    return info->batch_host;
  }

  ExecStatus Poll(const std::string& handle_text) override {
    auto handle = json::parse(handle_text, nullptr, false);
    if (!handle.is_object() || !handle.contains("slurm_job_id")) {
      return {ExecStatus::Phase::kLost, 0, "unreadable executor handle", ""};
    }
    std::string id = handle["slurm_job_id"].get<std::string>();
    CommandOutput shown = runner_.Run({"scontrol", "show", "job", id, "-o"}, kCommandTimeout);
    if (shown.exit_code == 0) {
      auto info = ParseScontrolJob(shown.out);
      if (info) return MapSlurmState(*info);
    }
    if (shown.err.find("Invalid job id") == std::string::npos) {
      // slurmctld unreachable or slow: not evidence that the job ended.
      return {ExecStatus::Phase::kRunning, 0, "", ""};
    }
    // Purged from slurmctld's memory: the batch script left its exit code.
    std::ifstream in(handle.value("run_dir", "") + "/result.json");
    auto result = json::parse(in, nullptr, false);
    if (result.is_object() && result.contains("exit_code")) {
      int code = result["exit_code"].get<int>();
      return {ExecStatus::Phase::kExited, code,
              code == 0 ? "" : "Slurm job " + id + " exited with code " + std::to_string(code), ""};
    }
    return {ExecStatus::Phase::kLost, 0,
            "Slurm no longer knows job " + id + " and it left no result", ""};
  }

  // A step of its own in the job's allocation, sharing the job's resources
  // (--overlap), on the node of the rank asked for, with the job's
  // environment and that rank's variables. srun passes a hang-up on to the
  // step and ends it, so the command gets time to end before srun is killed.
  Result<ExecProcess> Exec(const std::string& handle_text, const ExecRequest& request) override {
    auto handle = json::parse(handle_text, nullptr, false);
    if (!handle.is_object() || !handle.contains("slurm_job_id"))
      return Internal("unreadable handle");
    // An SSH session is `headway ssh-serve` run as the command, with the
    // host key in its environment (which it clears before running anything).
    std::string ssh_host_key;
    if (!request.ssh_host_key_file.empty()) {
      if (self_.empty()) return Unavailable("this server cannot serve SSH sessions on Slurm");
      std::ifstream key(request.ssh_host_key_file);
      ssh_host_key.assign(std::istreambuf_iterator<char>(key), {});
      if (ssh_host_key.empty()) return Internal("the SSH host key is not readable");
    }
    const std::string id = handle["slurm_job_id"].get<std::string>();
    const std::string run_dir = handle.value("run_dir", "");
    const int per_node = std::max(1, handle.value("ranks_per_node", 1));
    const int ranks = std::max(1, handle.value("ranks", 1));
    const int rank = request.rank;
    // A name of its own, so that this step can be found and ended.
    std::random_device random;
    char nonce[17];
    std::snprintf(nonce, sizeof nonce, "%08x%08x", random(), random());
    const std::string step_name = std::string("headway-exec-") + nonce;
    std::vector<std::string> argv = {"srun",
                                     "--jobid=" + id,
                                     "--overlap",
                                     "--nodes=1",
                                     "--ntasks=1",
                                     "--relative=" + std::to_string(rank / per_node),
                                     "--chdir=" + handle.value("cwd", run_dir),
                                     "--quiet",
                                     "--job-name=" + step_name};
    if (request.tty) argv.push_back("--pty");
    // The step's output as it comes, not held until a newline: an SSH
    // connection is not made of lines.
    if (!ssh_host_key.empty()) argv.push_back("--unbuffered");
    argv.insert(argv.end(),
                {"/bin/bash", "-c",
                 "set -a; . \"$1\"; set +a; shift; "
                 "export RANK=" +
                     std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank % per_node) +
                     " NODE_RANK=" + std::to_string(rank / per_node) + " GROUP_RANK=" +
                     std::to_string(rank / per_node) + " WORLD_SIZE=" + std::to_string(ranks) +
                     "; if [ $# -eq 0 ]; then login=$(getent passwd \"$(id -u)\" | cut -d: -f7); "
                     "exec -l \"${login:-/bin/bash}\"; fi; exec \"$@\"",
                 "headway-exec", run_dir + "/job-env.sh"});
    if (ssh_host_key.empty()) {
      argv.insert(argv.end(), request.argv.begin(), request.argv.end());
    } else {
      argv.insert(argv.end(), {self_, "ssh-serve"});
    }
    // srun is looked up as sbatch is, on the server's PATH.
    std::string srun;
    for (const std::string& entry : ToolEnvironment()) {
      if (!entry.starts_with("PATH=")) continue;
      std::string_view path(entry);
      path.remove_prefix(5);
      while (srun.empty() && !path.empty()) {
        std::string dir(path.substr(0, path.find(':')));
        path.remove_prefix(std::min(path.size(), dir.size() + 1));
        if (!dir.empty() && ::access((dir + "/srun").c_str(), X_OK) == 0) srun = dir + "/srun";
      }
    }
    if (srun.empty()) return Unavailable("srun is not installed on the server's PATH");
    argv[0] = srun;
    AttachOptions options;
    options.env = ToolEnvironment();
    if (!ssh_host_key.empty()) options.env.push_back("HEADWAY_SSH_HOST_KEY=" + ssh_host_key);
    options.new_session = true;
    auto started = StartAttached(argv, request, options);
    if (!started.ok()) return started;
    started->stop_grace = std::chrono::seconds(5);
    // srun usually ends its step when hung up on; if it is killed first,
    // Slurm keeps the step until it notices, so it is cancelled by name.
    started->after_hang_up = [this, id, step_name] {
      CommandOutput steps = runner_.Run(
          {"squeue", "--noheader", "--steps", "--jobs=" + id, "--format=%i %j"}, kStepTimeout);
      std::istringstream lines(steps.out);
      std::string step, name;
      while (lines >> step >> name) {
        if (name == step_name) (void)runner_.Run({"scancel", step}, kStepTimeout);
      }
    };
    return started;
  }

  Status Signal(const std::string& handle_text, int signal) override {
    auto handle = json::parse(handle_text, nullptr, false);
    if (!handle.is_object() || !handle.contains("slurm_job_id"))
      return Internal("unreadable handle");
    std::string id = handle["slurm_job_id"].get<std::string>();
    std::vector<std::string> argv = {"scancel"};
    // A plain scancel is Slurm's stop (SIGTERM, then SIGKILL after KillWait), and
    // also cancels a job still pending. Other signals go to every task.
    if (signal != SIGTERM) argv.push_back("--signal=" + SignalName(signal));
    if (signal == SIGUSR1 || signal == SIGUSR2) argv.push_back("--full");
    argv.push_back(id);
    CommandOutput out = runner_.Run(argv, kCommandTimeout);
    if (out.exit_code != 0 && out.err.find("Invalid job id") == std::string::npos &&
        out.err.find("already completing") == std::string::npos) {
      return Unavailable("scancel failed: " + out.err);
    }
    return Status::Ok();
  }

 private:
  CommandRunner& runner_;
  const std::uint64_t max_log_bytes_;  // 0: no limit
  const std::string self_;  // the headway binary (headway ssh-serve); empty: no SSH sessions
};

}  // namespace

std::optional<SlurmJobInfo> ParseScontrolJob(const std::string& text) {
  static const std::regex state(R"((?:^|\s)JobState=(\S+))");
  static const std::regex reason(R"((?:^|\s)Reason=(\S+))");
  static const std::regex exit_code(R"((?:^|\s)ExitCode=(\d+):(\d+))");
  static const std::regex batch_host(R"((?:^|\s)BatchHost=(\S+))");
  std::smatch m;
  SlurmJobInfo info;
  if (!std::regex_search(text, m, state)) return std::nullopt;
  info.state = m[1];
  if (std::regex_search(text, m, reason)) info.reason = m[1];
  if (std::regex_search(text, m, batch_host) && m[1] != "(null)") info.batch_host = m[1];
  if (std::regex_search(text, m, exit_code)) {
    info.exit_code = std::stoi(m[1]);
    info.exit_signal = std::stoi(m[2]);
  }
  return info;
}

ExecStatus MapSlurmState(const SlurmJobInfo& info) {
  using Phase = ExecStatus::Phase;
  const std::string& s = info.state;
  int code = info.exit_signal != 0 ? 128 + info.exit_signal : info.exit_code;
  if (s == "PENDING" || s == "CONFIGURING" || s == "REQUEUED" || s == "RESV_DEL_HOLD") {
    return {Phase::kPending, 0, "pending in Slurm: " + info.reason, ""};
  }
  if (s == "RUNNING" || s == "COMPLETING" || s == "SUSPENDED" || s == "STAGE_OUT" ||
      s == "SIGNALING" || s == "RESIZING") {
    return {Phase::kRunning, 0, "", ""};
  }
  if (s == "COMPLETED") return {Phase::kExited, 0, "", ""};
  if (s == "FAILED") {
    return {Phase::kExited, code == 0 ? 1 : code,
            "Slurm: FAILED with exit code " + std::to_string(code) +
                (info.reason.empty() || info.reason == "None" ? "" : " (" + info.reason + ")"),
            ""};
  }
  if (s == "TIMEOUT" || s == "DEADLINE") {
    return {Phase::kExited, code == 0 ? 1 : code, "Slurm: " + s + ", the time limit was reached",
            "TimeLimitExceeded"};
  }
  if (s == "CANCELLED")
    return {Phase::kExited, code == 0 ? 1 : code, "Slurm: CANCELLED", "Cancelled"};
  if (s == "PREEMPTED")
    return {Phase::kExited, code == 0 ? 1 : code, "Slurm: PREEMPTED", "Preempted"};
  if (s == "NODE_FAIL" || s == "BOOT_FAIL") {
    return {Phase::kExited, code == 0 ? 1 : code, "Slurm: " + s, "NodeFail"};
  }
  if (s == "OUT_OF_MEMORY")
    return {Phase::kExited, code == 0 ? 1 : code, "Slurm: OUT_OF_MEMORY", "OutOfMemory"};
  return {Phase::kExited, code == 0 ? 1 : code, "Slurm: " + s, s};
}

std::unique_ptr<Executor> MakeSlurmExecutor(CommandRunner& runner, std::uint64_t max_log_bytes,
                                            std::string self_executable) {
  return std::make_unique<SlurmExecutor>(runner, max_log_bytes, std::move(self_executable));
}

}  // namespace headway
