// Job isolation on the real server: what a job can reach of the control plane
// and of other jobs (attacks from a tenant's job), which account it runs as,
// and that stopping it ends every process it started. The tests run as root
// in CI, so the server runs jobs as `nobody` unless a test maps a team.
#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "test_server.h"

namespace headway::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

TEST(Isolation, AJobCannotReachTheControlPlaneOtherJobsOrTheServersEnvironment) {
  // The server's own secrets must not reach jobs through the environment.
  ::setenv("AWS_SECRET_ACCESS_KEY", "server-secret-4242", 1);
  TestServer server(/*gpus=*/2);
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  const std::string data = server.data_dir();
  const std::string release = server.work_dir() + "/release-victim";

  // Team b's job: a checkpoint, then it runs until released.
  server.Submit(
      "name: victim\nteam: b\ncommand: \"echo b-weights > $HEADWAY_CHECKPOINT_DIR/model.pt; "
      "while [ ! -e " +
      release + " ]; do sleep 0.1; done\"\n");
  const std::string victim_checkpoint = data + "/jobs/victim/checkpoints/model.pt";
  ASSERT_TRUE(WaitFor([&] { return fs::exists(victim_checkpoint); })) << server.ServerLog();

  // Team a's job tries each attack of the tenancy report and writes what worked.
  const std::string report = server.work_dir() + "/attack-report";
  const std::string victim_run = data + "/jobs/victim/attempt-0";
  std::string script =
      "r=" + report +
      "\n"
      "try_read() { if cat \"$2\" >/dev/null 2>&1; then echo \"READ $1\" >> $r; "
      "else echo \"DENIED $1\" >> $r; fi; }\n"
      "try_read admin-token " +
      Quoted(data + "/admin-token") +
      "\n"
      "try_read database " +
      Quoted(data + "/headway.db") +
      "\n"
      "try_read victim-launch " +
      Quoted(victim_run + "/launch.json") +
      "\n"
      "try_read victim-kubeflow-token " +
      Quoted(victim_run + "/kubeflow-token") +
      "\n"
      "try_read victim-log " +
      Quoted(victim_run + "/rank-0.log") +
      "\n"
      "try_read victim-checkpoint " +
      Quoted(victim_checkpoint) +
      "\n"
      "try_read walked-checkpoint \"$HEADWAY_CHECKPOINT_DIR/../../victim/checkpoints/model.pt\"\n"
      "echo \"LISTED $(ls " +
      Quoted(data) + " | tr '\\n' ' ')/ $(ls " + Quoted(data + "/jobs") +
      " | tr '\\n' ' ')\" >> $r\n"
      "if echo evil > " +
      Quoted(data + "/jobs/victim/checkpoints/evil") +
      " 2>/dev/null; then echo 'WROTE victim-checkpoint' >> $r; fi\n"
      "if env | grep -q server-secret-4242; then echo 'LEAK environment' >> $r; fi\n"
      "for p in /proc/[0-9]*; do\n"
      "  if grep -aq server-secret-4242 $p/environ 2>/dev/null; then echo \"LEAK $p/environ\" >> "
      "$r; fi\n"
      "  echo \"PROC $(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" >> $r\n"
      "done\n"
      "echo mine > $HEADWAY_CHECKPOINT_DIR/own && echo 'OWN checkpoint' >> $r\n"
      "[ -s \"$KUBEFLOW_TRAINER_SERVER_TOKEN\" ] && echo 'OWN kubeflow-token' >> $r\n"
      "echo \"UID $(id -u)\" >> $r\n"
      "echo \"HOME $HOME\" >> $r\n";
  WriteFile(server.work_dir() + "/attack.sh", script);
  server.Submit("name: attacker\nteam: a\ncommand: [/bin/sh, " + server.work_dir() +
                "/attack.sh]\n");
  ASSERT_TRUE(server.WaitForState("attacker", "Succeeded")) << server.Cli({"logs", "attacker"}).out;
  std::string out = ReadFile(report);

  for (const char* target : {"admin-token", "database", "victim-launch", "victim-kubeflow-token",
                             "victim-log", "victim-checkpoint", "walked-checkpoint"}) {
    EXPECT_THAT(out, HasSubstr(std::string("DENIED ") + target + "\n")) << out;
    EXPECT_THAT(out, Not(HasSubstr(std::string("READ ") + target + "\n")));
  }
  // Of the data directory it sees only the way to its own directories.
  EXPECT_THAT(out, HasSubstr("LISTED jobs / attacker \n")) << out;
  EXPECT_THAT(out, Not(HasSubstr("WROTE"))) << out;
  EXPECT_FALSE(fs::exists(data + "/jobs/victim/checkpoints/evil"));
  EXPECT_THAT(out, Not(HasSubstr("LEAK"))) << out;
  // Its PID namespace shows its own processes only: not the server, not team b's job.
  EXPECT_THAT(out, Not(HasSubstr("headway server"))) << out;
  EXPECT_THAT(out, Not(HasSubstr(release))) << out;
  EXPECT_THAT(out, HasSubstr("OWN checkpoint"));
  EXPECT_THAT(out, HasSubstr("OWN kubeflow-token"));
  if (::geteuid() == 0) {
    EXPECT_THAT(out, HasSubstr("UID 65534\n")) << out;
  }
  EXPECT_EQ(ReadFile(victim_checkpoint), "b-weights\n");

  WriteFile(release, "");
  EXPECT_TRUE(server.WaitForState("victim", "Succeeded"));
}

// A root server's default data directory is under /root (0700): the job's
// account cannot pass through it, yet must reach its own checkpoint
// directory, home and token file.
TEST(Isolation, AJobReachesItsOwnFilesEvenBehindADirectoryItCannotEnter) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a server that runs jobs as another account";
  TestServer server(/*gpus=*/0);
  const std::string closed = fs::path(server.data_dir()).parent_path();
  ::chmod(closed.c_str(), 0700);
  server.Submit(
      "name: behind\ncommand: \"echo kept > $HEADWAY_CHECKPOINT_DIR/weights && "
      "cat $KUBEFLOW_TRAINER_SERVER_TOKEN > /dev/null && cd && pwd\"\n");
  bool done = server.WaitForState("behind", "Succeeded");
  ::chmod(closed.c_str(), 0755);
  ASSERT_TRUE(done) << server.Cli({"logs", "behind"}).out << server.Job("behind").dump();
  EXPECT_EQ(ReadFile(server.data_dir() + "/jobs/behind/checkpoints/weights"), "kept\n");
}

TEST(Isolation, TheDataDirectoryAndItsFilesArePrivate) {
  TestServer server(/*gpus=*/0);
  server.Submit("name: quick\ncommand: \"echo hello\"\n");
  ASSERT_TRUE(server.WaitForState("quick", "Succeeded"));
  const std::string data = server.data_dir();
  EXPECT_EQ(ModeOf(data), 0700u);
  for (const std::string& file :
       {data + "/headway.db", data + "/headway.db-wal", data + "/jobs/quick/attempt-0/launch.json",
        data + "/jobs/quick/attempt-0/rank-0.log", data + "/jobs/quick/attempt-0/result.json",
        data + "/jobs/quick/attempt-0/supervisor.log"}) {
    ASSERT_TRUE(fs::exists(file)) << file;
    EXPECT_EQ(ModeOf(file) & 077, 0u) << file << " is readable by others";
  }
  // A token file is created private, then handed to the job's account read-only.
  EXPECT_EQ(ModeOf(data + "/jobs/quick/attempt-0/kubeflow-token") & 077, 0u);

  // An older install's open directory is closed on the next start.
  server.Terminate();
  fs::permissions(data, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  ::chmod((data + "/headway.db").c_str(), 0644);
  server.Restart();
  EXPECT_EQ(ModeOf(data), 0700u);
  EXPECT_EQ(ModeOf(data + "/headway.db"), 0600u);
}

// Team b's job looks for (and tries to append to) what team a's job writes
// in /tmp while both run; a's job reads what the host keeps in /tmp. Each
// job's /tmp is the host's seen through a layer of its own.
TEST(Isolation, EachJobWritesATmpOfItsOwnAndStillReadsTheHosts) {
  TestServer server(/*gpus=*/0);
  const std::string work = server.work_dir();
  const std::string host_dir = MakeTempDir("headway-host-files");
  const std::string host_tmp = "/tmp/" + fs::path(host_dir).filename().string();
  fs::create_directories(host_tmp);
  ::chmod(host_tmp.c_str(), 0755);
  WriteFile(host_tmp + "/dataset.txt", "from the host\n");
  ::chmod((host_tmp + "/dataset.txt").c_str(), 0644);
  const std::string secret = host_tmp + "-secret.txt";
  WriteFile(work + "/a.py",
            "import os, time\n"
            "open('" +
                work + "/a-read', 'w').write(open('" + host_tmp +
                "/dataset.txt').read())\n"
                "with open('" +
                secret +
                "', 'w') as f: f.write('a secret')\n"
                "open('" +
                work +
                "/a-ready', 'w').close()\n"
                "for _ in range(600):\n"
                "    if os.path.exists('" +
                work +
                "/b-done'): break\n"
                "    time.sleep(0.05)\n"
                "print('a still reads', open('" +
                secret + "').read())\n");
  WriteFile(work + "/b.py",
            "import os, time\n"
            "for _ in range(600):\n"
            "    if os.path.exists('" +
                work +
                "/a-ready'): break\n"
                "    time.sleep(0.05)\n"
                "seen = 'present' if os.path.exists('" +
                secret +
                "') else 'absent'\n"
                "with open('" +
                secret +
                "', 'a') as f: f.write(' and b was here')\n"
                "open('" +
                work +
                "/b-saw', 'w').write(seen)\n"
                "open('" +
                work + "/b-done', 'w').close()\n");
  server.Submit("name: a-job\nteam: a\ncommand: [/usr/bin/python3, " + work + "/a.py]\n");
  server.Submit("name: b-job\nteam: b\ncommand: [/usr/bin/python3, " + work + "/b.py]\n");
  ASSERT_TRUE(server.WaitForState("a-job", "Succeeded")) << server.Cli({"logs", "a-job"}).out;
  ASSERT_TRUE(server.WaitForState("b-job", "Succeeded")) << server.Cli({"logs", "b-job"}).out;
  EXPECT_EQ(ReadFile(work + "/a-read"), "from the host\n");
  EXPECT_EQ(ReadFile(work + "/b-saw"), "absent");
  EXPECT_THAT(server.Cli({"logs", "a-job"}).out, HasSubstr("a still reads a secret\n"));
  // Nothing either wrote reached the host's /tmp.
  EXPECT_FALSE(fs::exists(secret));
  fs::remove_all(host_tmp);
}

// /dev/nvidia0 and /dev/nvidia1 as the driver makes them (character devices
// 195:N), for the life of a test, on a machine without GPUs.
// The tests that make them take turns (ctest runs them side by side): a
// lock on a file held for the fixture's life.
struct FakeGpuNodes {
  FakeGpuNodes() {
    lock = ::open((TestTempRoot() + "/headway-fake-gpu-nodes.lock").c_str(),
                  O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    theirs = fs::exists("/dev/nvidia0") || fs::exists("/dev/nvidia1");
    if (theirs) return;
    for (int minor : {0, 1}) {
      const std::string path = "/dev/nvidia" + std::to_string(minor);
      made = ::mknod(path.c_str(), S_IFCHR | 0666, makedev(195, minor)) == 0 && made;
    }
  }
  ~FakeGpuNodes() {
    if (!theirs) {
      ::unlink("/dev/nvidia0");
      ::unlink("/dev/nvidia1");
    }
    if (lock >= 0) ::close(lock);
  }
  FakeGpuNodes(const FakeGpuNodes&) = delete;
  FakeGpuNodes& operator=(const FakeGpuNodes&) = delete;
  bool made = true;
  bool theirs = false;  // the machine has NVIDIA device nodes of its own
  int lock = -1;
};

// A job that sets CUDA_VISIBLE_DEVICES itself still reaches only its own
// GPUs: the others' device nodes are /dev/null in its sandbox. There is no
// GPU here, so the test makes /dev/nvidia0 and /dev/nvidia1 as the driver
// would (character devices 195:N) for a pool of two logical GPUs.
TEST(Isolation, AJobSeesOnlyItsOwnGpusDeviceNodes) {
  if (::geteuid() != 0) GTEST_SKIP() << "making device nodes needs root";
  FakeGpuNodes nodes;
  if (nodes.theirs) GTEST_SKIP() << "this machine has NVIDIA device nodes of its own";
  ASSERT_TRUE(nodes.made) << std::strerror(errno);
  TestServer server(/*gpus=*/2);
  const std::string look =
      "command: \"echo gpus=$CUDA_VISIBLE_DEVICES; stat -c '%n %t:%T' /dev/nvidia0 "
      "/dev/nvidia1\"\n";
  server.Submit("name: one-gpu\nresources: {gpus_per_process: 1}\n" + look);
  server.Submit("name: no-gpu\n" + look);
  ASSERT_TRUE(server.WaitForState("one-gpu", "Succeeded")) << server.Cli({"logs", "one-gpu"}).out;
  ASSERT_TRUE(server.WaitForState("no-gpu", "Succeeded")) << server.Cli({"logs", "no-gpu"}).out;
  const std::string one = server.Cli({"logs", "one-gpu"}).out;
  std::smatch own;
  ASSERT_TRUE(std::regex_search(one, own, std::regex("gpus=([01])\n"))) << one;
  const std::string mine = own[1], other = mine == "0" ? "1" : "0";
  // Its own node is the GPU's (c3 is 195); the other is /dev/null's (1:3).
  EXPECT_THAT(one, HasSubstr("/dev/nvidia" + mine + " c3:" + mine + "\n")) << one;
  EXPECT_THAT(one, HasSubstr("/dev/nvidia" + other + " 1:3\n")) << one;
  const std::string none = server.Cli({"logs", "no-gpu"}).out;
  EXPECT_THAT(none, HasSubstr("/dev/nvidia0 1:3\n")) << none;
  EXPECT_THAT(none, HasSubstr("/dev/nvidia1 1:3\n")) << none;
}

// An elastic job that grows onto a GPU sees that GPU's device node in its
// sandbox from then on (it was masked when the job started on the other).
TEST(Isolation, AnElasticJobsNewRankGroupSeesTheGpuItGrewOnto) {
  if (::geteuid() != 0) GTEST_SKIP() << "making device nodes needs root";
  FakeGpuNodes nodes;
  if (nodes.theirs) GTEST_SKIP() << "this machine has NVIDIA device nodes of its own";
  ASSERT_TRUE(nodes.made) << std::strerror(errno);
  TestServer server(/*gpus=*/2, {"--elastic-interval", "1"});
  // Rank group 0 reports steps (so its speed is measured and it grows);
  // rank group 1 looks at both GPUs' device nodes.
  server.Submit(R"(name: grows
resources: {gpus_per_process: 1}
elastic: {min_ranks: 1, max_ranks: 2}
termination_grace: 2s
command: |
  if [ "$HEADWAY_RANK_GROUP" = 0 ]; then
    i=0; while true; do i=$((i+1)); printf 'HEADWAY {"step": %d}\n' $i; sleep 0.05; done
  fi
  echo gpus=$CUDA_VISIBLE_DEVICES; stat -c '%n %t:%T' /dev/nvidia0 /dev/nvidia1; sleep 600
)");
  ASSERT_TRUE(WaitFor([&] { return server.HasEvent("grows", "Resized", "grew to 2 rank groups"); },
                      std::chrono::seconds(60)))
      << server.Cli({"describe", "job", "grows"}).out;
  std::string logs;
  ASSERT_TRUE(WaitFor([&] {
    logs = server.Cli({"logs", "grows"}).out;
    return logs.find("[rank 1] /dev/nvidia1") != std::string::npos;  // merged, each line's rank
  })) << logs;
  std::smatch own;
  ASSERT_TRUE(std::regex_search(logs, own, std::regex("\\[rank 1\\] gpus=([01])\n"))) << logs;
  const std::string mine = own[1], other = mine == "0" ? "1" : "0";
  EXPECT_THAT(logs, HasSubstr("[rank 1] /dev/nvidia" + mine + " c3:" + mine + "\n")) << logs;
  EXPECT_THAT(logs, HasSubstr("[rank 1] /dev/nvidia" + other + " c3:" + other + "\n"))
      << "rank group 0's GPU, of the same job: " << logs;
  EXPECT_EQ(server.Cli({"stop", "grows"}).exit_code, 0);
  EXPECT_TRUE(server.WaitForState("grows", "Stopped", std::chrono::seconds(30)));
}

// A GPU's device node that is gone by the time the job's sandbox is built
// (a driver reload; here, the stand-in nodes removed while the supervisor
// starts) leaves nothing to mask: the job starts all the same.
TEST(Isolation, AGpuNodeGoneBeforeTheSandboxIsBuiltLeavesTheJobRunning) {
  if (::geteuid() != 0) GTEST_SKIP() << "making device nodes needs root";
  FakeGpuNodes nodes;
  if (nodes.theirs) GTEST_SKIP() << "this machine has NVIDIA device nodes of its own";
  ASSERT_TRUE(nodes.made) << std::strerror(errno);
  ::setenv("HEADWAY_TEST_SLOW_SUPERVISOR", "1", 1);
  TestServer server(/*gpus=*/2);
  ::unsetenv("HEADWAY_TEST_SLOW_SUPERVISOR");
  server.Submit("name: planned\nresources: {gpus_per_process: 1}\ncommand: \"echo ran\"\n");
  // The launch is planned (the other GPU's node listed to be masked); its
  // supervisor has not built the sandbox yet.
  ASSERT_TRUE(WaitFor(
      [&] { return fs::exists(server.data_dir() + "/jobs/planned/attempt-0/launch.json"); }));
  ::unlink("/dev/nvidia0");
  ::unlink("/dev/nvidia1");
  ASSERT_TRUE(server.WaitForState("planned", "Succeeded"))
      << server.Job("planned").dump() << server.Cli({"logs", "planned"}).out;
  EXPECT_THAT(server.Cli({"logs", "planned"}).out, HasSubstr("ran\n"));
}

// A root server passes its PATH on; as `nobody`, a job cannot search root's
// folders on it (here one of mode 0700, as /root/.local/bin is). A missing
// command is still "not found" (127), in the job and in `headway exec`, not
// "Permission denied" (126).
TEST(Isolation, AMissingCommandIsNotFoundEvenWithRootsFoldersOnThePath) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a server that runs jobs as another account";
  const std::string closed = MakeTempDir("headway-root-only-bin");
  ::chmod(closed.c_str(), 0700);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin";
  ::setenv("PATH", (closed + ":" + path).c_str(), 1);
  TestServer server(/*gpus=*/0);
  ::setenv("PATH", path.c_str(), 1);
  server.Submit("name: typo\ncommand: [no-such-program-here]\n");
  server.Submit("name: sleeper\ncommand: \"sleep 300\"\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("typo", "Failed"));
  EXPECT_EQ(server.Job("typo")["exit_code"], 127) << server.Cli({"logs", "typo"}).out;
  EXPECT_THAT(server.Cli({"logs", "typo"}).out, HasSubstr("No such file or directory"));
  ASSERT_TRUE(server.WaitForState("sleeper", "Running"));
  CommandResult exec = server.Cli({"exec", "sleeper", "--", "no-such-program-here"});
  EXPECT_EQ(exec.exit_code, 127) << exec.err;
  // The job's own PATH leaves the folder out too, and keeps the rest.
  CommandResult seen = server.Cli({"exec", "sleeper", "--", "sh", "-c", "echo $PATH"});
  EXPECT_THAT(seen.out, Not(HasSubstr(closed))) << seen.out;
  EXPECT_THAT(seen.out, HasSubstr("/usr/bin"));
  server.Cli({"stop", "sleeper"});
}

TEST(Isolation, StopEndsDaemonsThatLeftTheJobsSessionBeforeItsGpusAreFreed) {
  TestServer server(/*gpus=*/1);
  const std::string started = server.work_dir() + "/daemons-started";
  // One daemon leaves the session (setsid) and ignores SIGTERM; another is
  // double-forked. Both would survive a process-group kill.
  server.Submit(
      "name: escaper\nresources: {gpus_per_process: 1}\ntermination_grace: 1s\n"
      "command: \"setsid sh -c 'trap \\\"\\\" TERM HUP; exec sleep 4242.42' & "
      "(sh -c 'exec sleep 4343.43' &) ; touch " +
      started + "; sleep 1000\"\n");
  ASSERT_TRUE(WaitFor([&] { return fs::exists(started); })) << server.Cli({"logs", "escaper"}).out;
  ASSERT_TRUE(WaitFor([&] {
    return !ProcessesWith("sleep 4242.42", "HEADWAY_URL=" + server.url()).empty() &&
           !ProcessesWith("sleep 4343.43", "HEADWAY_URL=" + server.url()).empty();
  }));
  // The next job waits for the GPU the escaper holds.
  server.Submit("name: next\nresources: {gpus_per_process: 1}\ncommand: \"true\"\n");
  ASSERT_EQ(server.Cli({"stop", "escaper"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("escaper", "Stopped"));
  // By the time the attempt is recorded as ended, nothing of it is left.
  EXPECT_THAT(ProcessesWith("sleep 4242.42", "HEADWAY_URL=" + server.url()), ::testing::IsEmpty());
  EXPECT_THAT(ProcessesWith("sleep 4343.43", "HEADWAY_URL=" + server.url()), ::testing::IsEmpty());
  EXPECT_TRUE(server.WaitForState("next", "Succeeded"));
}

// A kill that comes while the supervisor is still starting the ranks (the job
// is Running as soon as its supervisor is) must still end them.
TEST(Isolation, AForceStopBeforeTheRanksStartedStillEndsThem) {
  ::setenv("HEADWAY_TEST_SLOW_SUPERVISOR", "1", 1);
  TestServer server(/*gpus=*/0);
  ::unsetenv("HEADWAY_TEST_SLOW_SUPERVISOR");
  server.Submit("name: early\ncommand: \"s=4949; exec sleep $s.49\"\n");
  ASSERT_TRUE(server.WaitForState("early", "Running"));
  ASSERT_EQ(server.Cli({"stop", "--force", "early"}).exit_code, 0);
  ASSERT_TRUE(server.WaitForState("early", "Stopped")) << server.Job("early").dump();
  EXPECT_THAT(ProcessesWith("sleep 4949.49", "HEADWAY_URL=" + server.url()), ::testing::IsEmpty());
}

TEST(Isolation, TimeLimitsEndDaemonsToo) {
  TestServer server(/*gpus=*/0);
  server.Submit(
      "name: overtime\ntime_limit: 1s\ntermination_grace: 1s\n"
      "command: \"setsid sh -c 'trap \\\"\\\" TERM HUP; exec sleep 4545.45' & sleep 1000\"\n");
  ASSERT_TRUE(server.WaitForState("overtime", "Failed", std::chrono::seconds(30)));
  EXPECT_EQ(server.Job("overtime")["reason"], "TimeLimitExceeded");
  EXPECT_THAT(ProcessesWith("sleep 4545.45", "HEADWAY_URL=" + server.url()), ::testing::IsEmpty());
}

TEST(Isolation, JobsRunAsTheTeamsAccountAndNeverAsRootUnlessAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs a server run as root";
  TestServer server(/*gpus=*/0, {"--run-as", "vision=daemon", "--run-as", "ops=root"});
  const std::string work = server.work_dir();
  for (const char* team : {"vision", "nlp", "ops"}) {
    server.Submit(std::string("name: whoami-") + team + "\nteam: " + team +
                  "\ncommand: \"id -u > " + work + "/uid-" + team + "\"\n");
  }
  ASSERT_TRUE(server.WaitForState("whoami-vision", "Succeeded"));
  ASSERT_TRUE(server.WaitForState("whoami-nlp", "Succeeded"));
  EXPECT_EQ(ReadFile(work + "/uid-vision"), "1\n");   // daemon
  EXPECT_EQ(ReadFile(work + "/uid-nlp"), "65534\n");  // the default job user, nobody
  ASSERT_TRUE(server.WaitForState("whoami-ops", "Failed"));
  auto ops = server.Job("whoami-ops");
  EXPECT_EQ(ops["reason"], "LaunchFailed");
  EXPECT_THAT(ops["message"].get<std::string>(), HasSubstr("--allow-root-jobs"));
  EXPECT_FALSE(fs::exists(work + "/uid-ops"));

  TestServer allowed(/*gpus=*/0, {"--run-as", "ops=root", "--allow-root-jobs"});
  allowed.Submit("name: whoami-ops\nteam: ops\ncommand: \"id -u > " + allowed.work_dir() +
                 "/uid-ops\"\n");
  ASSERT_TRUE(allowed.WaitForState("whoami-ops", "Succeeded"));
  EXPECT_EQ(ReadFile(allowed.work_dir() + "/uid-ops"), "0\n");
}

TEST(Isolation, ARootServerRefusesSlurmQueuesUnlessRootJobsAreAllowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "the rule is for servers run as root";
  std::string data = MakeTempDir("headway-slurm-root");
  CommandResult r =
      RunCommand({"/usr/bin/timeout", "20", HEADWAY_BIN, "server", "--listen", "127.0.0.1:0",
                  "--data-dir", data + "/data", "--queue", "gpu=slurm:partition=debug"});
  fs::remove_all(data);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.out + r.err, HasSubstr("--allow-root-jobs"));
}

TEST(Isolation, AMappingToAMissingAccountFailsTheJobClearly) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching accounts needs a server run as root";
  TestServer server(/*gpus=*/0, {"--run-as", "vision=no-such-account"});
  server.Submit("name: lost\nteam: vision\ncommand: \"true\"\n");
  ASSERT_TRUE(server.WaitForState("lost", "Failed"));
  EXPECT_THAT(server.Job("lost")["message"].get<std::string>(), HasSubstr("no-such-account"));
}

TEST(Isolation, AMemoryLimitIsEnforced) {
  TestServer server(/*gpus=*/0);
  if (server.ServerLog().find("memory limits: unavailable") != std::string::npos) {
    GTEST_SKIP() << "no memory controller on this machine";
  }
  // Writes 512 MiB into memory with a 64 MiB limit.
  server.Submit(
      "name: hog\nresources: {memory: 64Mi}\n"
      "command: [/usr/bin/python3, -c, \"b = b'x' * (512 << 20); print(len(b))\"]\n");
  ASSERT_TRUE(server.WaitForState("hog", "Failed", std::chrono::seconds(60)));
  auto hog = server.Job("hog");
  EXPECT_EQ(hog["exit_code"], 137);
  EXPECT_THAT(hog["message"].get<std::string>(), HasSubstr("out of memory")) << hog.dump();

  server.Submit(
      "name: fits\nresources: {memory: 256Mi}\n"
      "command: [/usr/bin/python3, -c, \"b = b'x' * (32 << 20); print(len(b))\"]\n");
  EXPECT_TRUE(server.WaitForState("fits", "Succeeded", std::chrono::seconds(60)));
}

TEST(Isolation, ACpuLimitIsWrittenToTheJobsCgroup) {
  TestServer server(/*gpus=*/0);
  if (server.ServerLog().find("cpu limits: unavailable") != std::string::npos) {
    GTEST_SKIP() << "no cpu controller on this machine";
  }
  const std::string release = server.work_dir() + "/release-cpu";
  server.Submit("name: capped\nresources: {cpus: 0.5}\ncommand: \"while [ ! -e " + release +
                " ]; do sleep 0.1; done\"\n");
  ASSERT_TRUE(server.WaitForState("capped", "Running"));
  std::string quota;
  ASSERT_TRUE(WaitFor([&] {
    // Other tests' cgroups come and go while this walks the tree: a
    // directory that vanishes under the iterator is skipped, not an error.
    std::error_code error;
    fs::recursive_directory_iterator it("/sys/fs/cgroup",
                                        fs::directory_options::skip_permission_denied, error);
    for (; !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
      const fs::path& path = it->path();
      // "capped.attempt-0.<hash of its run directory>"
      if (path.filename().string().rfind("capped.attempt-0.", 0) != 0) continue;
      if (fs::exists(path / "cpu.max", error)) quota = ReadFile(path / "cpu.max");
      if (fs::exists(path / "cpu.cfs_quota_us", error)) {
        quota = ReadFile(path / "cpu.cfs_quota_us");
      }
    }
    return !quota.empty();
  }));
  EXPECT_EQ(quota.substr(0, 5), "50000");
  WriteFile(release, "");
  EXPECT_TRUE(server.WaitForState("capped", "Succeeded"));
}

// The single-user install: a server run by an ordinary account (here nobody)
// runs jobs as that same account, so file modes cannot keep them from its
// files; a user namespace with mount and PID namespaces does.
TEST(Isolation, ASingleUserServerHidesItsFilesFromItsOwnJobs) {
  if (::geteuid() != 0) GTEST_SKIP() << "starting a server as another account needs root";
  const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                              "--clear-groups"};
  auto as_nobody_run = [&](std::vector<std::string> argv) {
    argv.insert(argv.begin(), as_nobody.begin(), as_nobody.end());
    return argv;
  };
  ASSERT_EQ(RunCommand(as_nobody_run({"/usr/bin/test", "-x", HEADWAY_BIN})).exit_code, 0)
      << HEADWAY_BIN << " must be executable by nobody for this test";
  const std::string base = MakeTempDir("headway-single-user");
  ASSERT_EQ(::chown(base.c_str(), 65534, 65534), 0);
  ::chmod(base.c_str(), 0755);
  const std::string data = base + "/data", work = base + "/work", log = base + "/server.log";
  fs::create_directories(work);
  fs::permissions(work, fs::perms::all);

  pid_t server = ::fork();
  if (server == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<std::string> argv =
        as_nobody_run({HEADWAY_BIN, "server", "--auth", "--listen", "127.0.0.1:0", "--data-dir",
                       data, "--gpus", "0"});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  std::smatch match;
  std::regex listening(R"(listening on (http://127\.0\.0\.1:\d+))");
  std::string server_log;
  ASSERT_TRUE(WaitFor([&] {
    server_log = ReadFile(log);
    return std::regex_search(server_log, match, listening);
  })) << ReadFile(log);
  const std::string url = match[1];
  std::string token = ReadFile(data + "/admin-token");
  token.erase(token.find_last_not_of(" \n") + 1);
  EXPECT_EQ(ModeOf(data), 0700u);

  const std::string report = work + "/report";
  WriteFile(work + "/probe.sh",
            "r=" + report +
                "\n"
                "echo \"LISTED $(ls " +
                data +
                " | tr '\\n' ' ')\" >> $r\n"
                "cat " +
                data +
                "/admin-token >/dev/null 2>&1 && echo 'READ admin-token' >> $r\n"
                "cat " +
                data +
                "/headway.db >/dev/null 2>&1 && echo 'READ database' >> $r\n"
                "for p in /proc/[0-9]*; do echo \"PROC $(tr '\\0' ' ' < $p/cmdline)\" >> $r; done\n"
                "echo mine > $HEADWAY_CHECKPOINT_DIR/own && echo 'OWN checkpoint' >> $r\n"
                "echo \"UID $(id -u)\" >> $r\n");
  CommandResult submitted = RunCommand(
      {HEADWAY_BIN, "--server", url, "--token", token, "submit", "-f", "-"},
      "name: probe\nworking_dir: " + work + "\ncommand: [/bin/sh, " + work + "/probe.sh]\n");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  EXPECT_TRUE(WaitFor([&] {
    return RunCommand({HEADWAY_BIN, "--server", url, "--token", token, "get", "jobs"})
               .out.find("Succeeded") != std::string::npos;
  })) << ReadFile(log);
  std::string out = ReadFile(report);
  // Deleted, the job leaves nothing behind: not even the folders its /tmp
  // overlay's kernel-made work folder (mode 000) sits in.
  CommandResult deleted =
      RunCommand({HEADWAY_BIN, "--server", url, "--token", token, "delete", "job", "probe"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_TRUE(WaitFor([&] {
    std::error_code gone;
    return fs::is_empty(data + "/jobs", gone) && !gone;
  })) << ReadFile(log);
  ::kill(server, SIGTERM);
  ::waitpid(server, nullptr, 0);
  std::error_code ec;
  fs::remove_all(base, ec);

  EXPECT_THAT(out, HasSubstr("LISTED jobs \n")) << out;
  EXPECT_THAT(out, Not(HasSubstr("READ"))) << out;
  EXPECT_THAT(out, Not(HasSubstr("headway server"))) << out;
  EXPECT_THAT(out, HasSubstr("OWN checkpoint")) << out;
  EXPECT_THAT(out, HasSubstr("UID 65534\n")) << out;
}

}  // namespace
}  // namespace headway::testing

namespace headway::testing {
namespace {

// Two servers on one machine (two users, two data directories) may each run
// a job of the same name: each attempt's cgroup is its own, so one server
// ending its job never kills the other's.
TEST(Isolation, TwoServersJobsOfTheSameNameDoNotShareACgroup) {
  TestServer first;
  TestServer second;
  for (TestServer* server : {&first, &second}) {
    server->Submit("name: twin\ncommand: \"sleep 60\"\ntermination_grace: 1s\n");
  }
  ASSERT_TRUE(first.WaitForState("twin", "Running"));
  ASSERT_TRUE(second.WaitForState("twin", "Running"));
  ASSERT_EQ(first.Cli({"stop", "twin"}).exit_code, 0);
  ASSERT_TRUE(first.WaitForState("twin", "Stopped"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a tick or more
  EXPECT_EQ(second.State("twin"), "Running");
  EXPECT_EQ(second.Cli({"stop", "twin"}).exit_code, 0);
}

}  // namespace
}  // namespace headway::testing
