#include <gtest/gtest.h>

#include <algorithm>

#include "exec/oci/cdi.h"
#include "exec/oci/runtime_config.h"

namespace headway::oci {
namespace {

using json = nlohmann::json;

ImageDefaults TrainerImage() {
  return ImageDefaults::FromImageConfig(json::parse(R"({
    "architecture": "amd64",
    "config": {"Env": ["PATH=/opt/conda/bin:/usr/bin:/bin", "LANG=C.UTF-8"],
               "Entrypoint": ["/usr/bin/python3"], "Cmd": ["train.py"],
               "WorkingDir": "/workspace", "User": "root"}})"));
}

bool HasEnv(const json& config, const std::string& entry) {
  const auto& env = config["process"]["env"];
  return std::find(env.begin(), env.end(), entry) != env.end();
}

TEST(OciRuntimeConfig, CommandArgsAndWorkingDirectoryFollowKubernetes) {
  const ImageDefaults image = TrainerImage();
  ContainerProcess process;
  EXPECT_EQ(ContainerArgv(image, process),
            (std::vector<std::string>{"/usr/bin/python3", "train.py"}));
  process.args = {"eval.py", "--fast"};
  EXPECT_EQ(ContainerArgv(image, process),
            (std::vector<std::string>{"/usr/bin/python3", "eval.py", "--fast"}));
  process.command = {"/bin/sh", "-c"};
  process.args = {"echo hi"};
  EXPECT_EQ(ContainerArgv(image, process), (std::vector<std::string>{"/bin/sh", "-c", "echo hi"}));
  EXPECT_TRUE(ContainerArgv(ImageDefaults{}, ContainerProcess{}).empty());

  ContainerPlan plan;
  plan.rootfs = "/run/job/image/root";
  json config = RuntimeConfig(image, process, plan);
  EXPECT_EQ(config["process"]["cwd"], "/workspace");
  process.cwd = "/data";
  EXPECT_EQ(RuntimeConfig(image, process, plan)["process"]["cwd"], "/data");
  EXPECT_EQ(RuntimeConfig(ImageDefaults{}, ContainerProcess{}, plan)["process"]["cwd"], "/");
}

TEST(OciRuntimeConfig, TheJobsVariablesWinAndPathComesFromTheImage) {
  ContainerProcess process;
  process.env = {{"LANG", "en_US.UTF-8"}, {"HEADWAY_JOB", "j"}};
  ContainerPlan plan;
  plan.extra_env = {"NVIDIA_VISIBLE_DEVICES=void"};
  json config = RuntimeConfig(TrainerImage(), process, plan);
  EXPECT_TRUE(HasEnv(config, "PATH=/opt/conda/bin:/usr/bin:/bin"));
  EXPECT_TRUE(HasEnv(config, "LANG=en_US.UTF-8"));
  EXPECT_TRUE(HasEnv(config, "HEADWAY_JOB=j"));
  EXPECT_TRUE(HasEnv(config, "NVIDIA_VISIBLE_DEVICES=void"));
  // An image without PATH gets the usual one.
  EXPECT_TRUE(HasEnv(RuntimeConfig(ImageDefaults{}, process, plan),
                     "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
}

TEST(OciRuntimeConfig, ItRunsAsTheAccountWithoutPrivilegesInTheAttemptsNamespaces) {
  ContainerProcess process;
  process.command = {"/bin/true"};
  process.uid = 65534;
  process.gid = 65534;
  process.groups = {65534, 100};
  ContainerPlan plan;
  plan.rootfs = "/r";
  plan.binds = {
      {"/data/jobs/j/checkpoints", "/data/jobs/j/checkpoints", false},
      {"/data/jobs/j/attempt-0/kubeflow-token", "/data/jobs/j/attempt-0/kubeflow-token", true}};
  json config = RuntimeConfig(TrainerImage(), process, plan);
  EXPECT_EQ(config["process"]["user"]["uid"], 65534);
  EXPECT_EQ(config["process"]["user"]["additionalGids"], json({65534, 100}));
  EXPECT_TRUE(config["process"]["noNewPrivileges"].get<bool>());
  EXPECT_TRUE(config["process"]["capabilities"]["bounding"].empty());
  EXPECT_TRUE(config["process"]["capabilities"]["effective"].empty());
  // Only a mount namespace: PID, network and IPC stay the attempt's.
  EXPECT_EQ(config["linux"]["namespaces"], json::parse(R"([{"type": "mount"}])"));
  EXPECT_EQ(config["root"]["path"], "/r");
  EXPECT_FALSE(config["root"]["readonly"].get<bool>());
  bool checkpoint_rw = false, token_ro = false;
  for (const json& m : config["mounts"]) {
    const auto& options = m["options"];
    const bool ro = std::find(options.begin(), options.end(), "ro") != options.end();
    if (m["destination"] == "/data/jobs/j/checkpoints") checkpoint_rw = !ro;
    if (m["destination"] == "/data/jobs/j/attempt-0/kubeflow-token") token_ro = ro;
  }
  EXPECT_TRUE(checkpoint_rw);
  EXPECT_TRUE(token_ro);
  const auto& masked = config["linux"]["maskedPaths"];
  EXPECT_NE(std::find(masked.begin(), masked.end(), "/proc/kcore"), masked.end());
}

TEST(Cdi, TheSpecNamesEachGpuByPoolIndexAndAContainerGetsOnlyItsOwn) {
  // Logical GPUs: made-up device numbers, as this machine has no GPU.
  std::vector<CdiGpu> gpus = {{0, {{"/dev/nvidia0", 'c', 195, 0}}},
                              {1, {{"/dev/nvidia3", 'c', 195, 3}}}};
  json spec = CdiSpec(gpus, {{"/dev/nvidiactl", 'c', 195, 255}, {"/dev/nvidia-uvm", 'c', 510, 0}});
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], "nvidia.com/gpu");
  ASSERT_EQ(spec["devices"].size(), 2u);
  EXPECT_EQ(spec["devices"][1]["name"], "1");
  EXPECT_EQ(spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia3");

  auto edits = CdiEditsFor(spec, {"nvidia.com/gpu=1"});
  ASSERT_TRUE(edits.ok());
  std::vector<std::string> paths;
  for (const DeviceNode& d : edits->devices) paths.push_back(d.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3"}));
  EXPECT_EQ(edits->devices[2].minor, 3);

  ContainerPlan plan;
  plan.devices = edits->devices;
  json config = RuntimeConfig(ImageDefaults{}, ContainerProcess{}, plan);
  ASSERT_EQ(config["linux"]["devices"].size(), 3u);
  EXPECT_EQ(config["linux"]["devices"][2]["path"], "/dev/nvidia3");
  EXPECT_EQ(config["linux"]["devices"][2]["major"], 195);
  for (const json& d : config["linux"]["devices"]) EXPECT_NE(d["path"], "/dev/nvidia0");

  auto missing = CdiEditsFor(spec, {"nvidia.com/gpu=7"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nvidia.com/gpu=7"), std::string::npos);
  EXPECT_FALSE(CdiEditsFor(spec, {"vendor.com/fpga=0"}).ok());
  ASSERT_TRUE(CdiEditsFor(spec, {}).ok());
  EXPECT_TRUE(CdiEditsFor(spec, {})->devices.empty());
}

}  // namespace
}  // namespace headway::oci
