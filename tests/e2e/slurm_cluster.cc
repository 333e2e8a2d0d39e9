#include "slurm_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../integration/test_server.h"

namespace headway::testing {

namespace fs = std::filesystem;

namespace {

int FreePort() {
  // Slurm needs two consecutive-free ports of its own; pick well away from
  // the defaults so a system Slurm is not disturbed.
  return 20000 + static_cast<int>(getpid() % 20000);
}

std::string Shell(const std::string& cmd) {
  CommandResult r = RunCommand({"/bin/sh", "-c", cmd});
  return r.out + r.err;
}

}  // namespace

SlurmCluster::SlurmCluster() { error_ = Start(); }

std::string SlurmCluster::Start() {
  if (geteuid() != 0) return "needs root to run slurmctld/slurmd";
  if (!fs::exists("/usr/sbin/slurmctld") || !fs::exists("/usr/sbin/slurmd") ||
      !fs::exists("/usr/sbin/munged")) {
    return "Slurm is not installed (apt-get install slurmctld slurmd slurm-client munge)";
  }
  dir_ = MakeTempDir("headway-slurm");
  conf_ = dir_ + "/slurm.conf";
  fs::create_directories(dir_ + "/state");
  fs::create_directories(dir_ + "/spool");
  for (int i = 0; i < 4; ++i) WriteFile(dir_ + "/gpu" + std::to_string(i), "");
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string node = std::string(host).substr(0, std::string(host).find('.'));
  int port = FreePort();
  unsigned cpus = std::max(2u, std::thread::hardware_concurrency());
  WriteFile(
      conf_,
      "ClusterName=headway-test\n"
      "SlurmctldHost=" +
          node +
          "(127.0.0.1)\n"
          "SlurmctldPort=" +
          std::to_string(port) +
          "\n"
          "SlurmdPort=" +
          std::to_string(port + 1) +
          "\n"
          "AuthType=auth/munge\nSlurmUser=root\nSlurmdUser=root\n"
          "StateSaveLocation=" +
          dir_ +
          "/state\n"
          "SlurmdSpoolDir=" +
          dir_ +
          "/spool\n"
          "SlurmctldPidFile=" +
          dir_ +
          "/slurmctld.pid\n"
          "SlurmdPidFile=" +
          dir_ +
          "/slurmd.pid\n"
          "SlurmctldLogFile=" +
          dir_ +
          "/slurmctld.log\n"
          "SlurmdLogFile=" +
          dir_ +
          "/slurmd.log\n"
          "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
          "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
          "SchedulerType=sched/backfill\nGresTypes=gpu\nMpiDefault=none\n"
          "ReturnToService=2\nKillWait=3\nMinJobAge=600\nJobAcctGatherType=jobacct_gather/none\n"
          "NodeName=" +
          node + " NodeAddr=127.0.0.1 CPUs=" + std::to_string(cpus) +
          " RealMemory=1000 Gres=gpu:4 State=UNKNOWN\n"
          "PartitionName=debug Nodes=" +
          node + " Default=YES MaxTime=INFINITE State=UP\n");
  WriteFile(dir_ + "/gres.conf", "NodeName=" + node + " Name=gpu File=" + dir_ + "/gpu[0-3]\n");
  setenv("SLURM_CONF", conf_.c_str(), 1);

  // munged: reuse a running one, else start it as the munge user.
  if (RunCommand({"/bin/sh", "-c", "munge -n | unmunge >/dev/null 2>&1"}).exit_code != 0) {
    Shell(
        "mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge; "
        "runuser -u munge -- /usr/sbin/munged --force");
    if (!WaitFor(
            [] {
              return RunCommand({"/bin/sh", "-c", "munge -n | unmunge"}).exit_code == 0;
            },
            std::chrono::seconds(10))) {
      return "munged did not start";
    }
  }
  std::string out = Shell("/usr/sbin/slurmctld -f " + conf_ + " && /usr/sbin/slurmd -f " + conf_);
  bool up = WaitFor(
      [] {
        CommandResult r = RunCommand({"/bin/sh", "-c", "sinfo -h -o %T"});
        return r.exit_code == 0 && r.out.find("idle") != std::string::npos;
      },
      std::chrono::seconds(30));
  if (!up) {
    return "Slurm did not come up: " + out +
           Shell("tail -5 " + dir_ + "/slurmctld.log " + dir_ + "/slurmd.log");
  }
  return "";
}

SlurmCluster::~SlurmCluster() {
  if (dir_.empty()) return;
  for (const char* pidfile : {"/slurmd.pid", "/slurmctld.pid"}) {
    std::ifstream in(dir_ + pidfile);
    pid_t pid = 0;
    if (in >> pid && pid > 0) {
      kill(pid, SIGTERM);
      WaitFor([pid] { return kill(pid, 0) != 0; }, std::chrono::seconds(10));
    }
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string SlurmCluster::ShowJob(const std::string& id) const {
  return RunCommand({"/usr/bin/scontrol", "show", "job", id, "-o"}).out;
}

}  // namespace headway::testing
