// policies.on_gpu_idle against a real server and real jobs. This machine has
// no GPU, so nvidia-smi is a stand-in script (--nvidia-smi) that prints the
// utilisation the test writes, in nvidia-smi's CSV; everything else is real.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;

class StandInNvidiaSmi {
 public:
  StandInNvidiaSmi() {
    char dir[] = "/tmp/headway-nvidia-smi-XXXXXX";
    dir_ = ::mkdtemp(dir);
    Set("");
    std::ofstream(path()) << "#!/bin/sh\n"
                             "# as `nvidia-smi --query-gpu=index,utilization.gpu "
                             "--format=csv,noheader,nounits`\n"
                             "cat '"
                          << dir_ << "/readings.csv'\n";
    ::chmod(path().c_str(), 0755);
  }
  ~StandInNvidiaSmi() { std::filesystem::remove_all(dir_); }
  std::string path() const { return dir_ + "/nvidia-smi"; }
  // What the next reading prints ("INDEX, PERCENT" lines).
  void Set(const std::string& csv) {
    std::ofstream(dir_ + "/readings.tmp") << csv;
    std::filesystem::rename(dir_ + "/readings.tmp", dir_ + "/readings.csv");
  }

 private:
  std::string dir_;
};

TEST(GpuIdle, AJobWhoseGpusStayIdleIsReportedOrStoppedAsItsPolicySays) {
  StandInNvidiaSmi nvidia_smi;
  nvidia_smi.Set("0, 90\n1, 90\n2, 90\n");
  TestServer server(3, {"--nvml-library", "", "--nvidia-smi", nvidia_smi.path(),
                        "--gpu-idle-check-interval", "250ms"});
  const std::string loop = R"(command: "while true; do sleep 0.2; done"
termination_grace: 1s
resources: {gpus_per_process: 1}
)";
  server.Submit("name: idle-stop\n" + loop + "policies: {on_gpu_idle: stop, gpu_idle_after: 2s}\n");
  server.Submit(
      "name: idle-notify\n" + loop +
      "policies: {on_gpu_idle: notify, gpu_idle_after: 2s, gpu_idle_below_percent: 50}\n");
  server.Submit("name: unwatched\n" + loop);
  for (const char* name : {"idle-stop", "idle-notify", "unwatched"}) {
    ASSERT_TRUE(server.WaitForState(name, "Running"));
  }
  // Busy GPUs: nothing happens, however long.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_FALSE(server.HasEvent("idle-stop", "GpuIdle", ""));
  EXPECT_FALSE(server.HasEvent("idle-notify", "GpuIdle", ""));

  // At 10%: below the notify policy's 50%, not below the stop policy's 5%.
  // The notify policy records an event and its job goes on.
  nvidia_smi.Set("0, 10\n1, 10\n2, 10\n");
  ASSERT_TRUE(WaitFor([&] { return server.HasEvent("idle-notify", "GpuIdle", "below 50%"); }));
  EXPECT_EQ(server.State("idle-notify"), "Running");
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(server.State("idle-stop"), "Running");
  EXPECT_FALSE(server.HasEvent("idle-stop", "GpuIdle", ""));

  // At 3%: the stop policy stops its job, with the reason.
  nvidia_smi.Set("0, 3\n1, 3\n2, 3\n");
  ASSERT_TRUE(server.WaitForState("idle-stop", "Stopped", std::chrono::seconds(20)));
  EXPECT_EQ(server.Job("idle-stop")["reason"], "GpuIdle");
  EXPECT_TRUE(server.HasEvent("idle-stop", "GpuIdle", "below 5% utilisation for"));
  EXPECT_TRUE(server.HasEvent("idle-stop", "GpuIdle", "stopping it (policies.on_gpu_idle: stop)"));
  EXPECT_FALSE(server.HasEvent("unwatched", "GpuIdle", ""));
  EXPECT_EQ(server.State("unwatched"), "Running");
  // Its GPU went back to the pool: a job that needs one runs (the other two are held).
  server.Submit("name: next\n" + loop);
  EXPECT_TRUE(server.WaitForState("next", "Running"));
}

// Where the driver's library is installed without nvidia-smi (containers
// often get one and not the other): the GPUs are found and read through
// NVML. This machine has no GPU, so the library is a stand-in with NVML's
// ABI (tests/fixtures/stand_in_nvml.cc) that answers from a file.
TEST(GpuIdle, WithoutNvidiaSmiTheGpusAreFoundAndReadThroughNvml) {
  const std::string dir = MakeTempDir("stand-in-nvml");
  const std::string readings = dir + "/readings.csv";
  auto set = [&](const std::string& csv) {
    WriteFile(readings + ".tmp", csv);
    std::filesystem::rename(readings + ".tmp", readings);
  };
  set("0, 80\n1, 80\n");
  ::setenv("HEADWAY_STAND_IN_NVML", readings.c_str(), 1);  // the server inherits it
  TestServer server(-1, {"--nvml-library", STAND_IN_NVML, "--nvidia-smi", dir + "/none",
                         "--gpu-idle-check-interval", "250ms"});
  ::unsetenv("HEADWAY_STAND_IN_NVML");
  EXPECT_THAT(server.ServerLog(), HasSubstr("GPU telemetry: NVML"));
  EXPECT_THAT(server.ServerLog(), HasSubstr("GPU 1: Stand-in GPU GPU-stand-in-1"));
  server.Submit(R"(name: both
command: "while true; do sleep 0.2; done"
termination_grace: 1s
resources: {gpus_per_process: 2}
policies: {on_gpu_idle: stop, gpu_idle_after: 2s}
)");
  ASSERT_TRUE(server.WaitForState("both", "Running")) << "the two GPUs NVML lists make the pool";
  // One GPU busy is a busy job; GPUs that give no reading are no signal.
  set("0, 80\n1, 0\n");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  set("0, -\n1, -\n");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(server.State("both"), "Running");
  set("0, 1\n1, 0\n");
  ASSERT_TRUE(server.WaitForState("both", "Stopped", std::chrono::seconds(20)));
  EXPECT_EQ(server.Job("both")["reason"], "GpuIdle");
}

}  // namespace
}  // namespace headway::testing
