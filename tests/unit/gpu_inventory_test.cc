#include "exec/local/gpu_inventory.h"

#include <gtest/gtest.h>

namespace headway {
namespace {

TEST(GpuInventory, ParsesNvidiaSmiCsv) {
  auto gpus = ParseNvidiaSmiCsv(
      "0, GPU-1f2e3d4c-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3\n"
      "1, GPU-aaaaaaaa-0000-1111-2222-333344445555, NVIDIA H100 80GB HBM3\r\n");
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[1].index, 1);
  EXPECT_EQ(gpus[0].uuid, "GPU-1f2e3d4c-0000-1111-2222-333344445555");
  EXPECT_EQ(gpus[0].name, "NVIDIA H100 80GB HBM3");
}

TEST(GpuInventory, SkipsDriverMessagesAndGarbage) {
  EXPECT_TRUE(ParseNvidiaSmiCsv("").empty());
  EXPECT_TRUE(ParseNvidiaSmiCsv("NVIDIA-SMI has failed because it couldn't communicate with the "
                                "NVIDIA driver.\n")
                  .empty());
  EXPECT_TRUE(ParseNvidiaSmiCsv("No devices were found\n").empty());
  EXPECT_EQ(ParseNvidiaSmiCsv("warning, something, odd\n0, GPU-x, A100\n").size(), 1u);
}

TEST(GpuInventory, ReadsUtilisationAndSkipsGpusWithoutAReading) {
  auto percent = ParseGpuUtilizationCsv(
      "0, 37\n1, [N/A]\n2, 100\r\n3, [Not Supported]\n"
      "4, 250\n5, nan\nNo devices were found\n");
  EXPECT_EQ(percent, (std::map<int, double>{{0, 37}, {2, 100}}));
  EXPECT_TRUE(ParseGpuUtilizationCsv("").empty());
}

TEST(GpuInventory, LogicalGpusAreNumberedFromZero) {
  auto gpus = LogicalGpus(3);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[2].index, 2);
}

// /proc/driver/nvidia/gpus/0000:3b:00.0/information as the 535 driver writes it.
TEST(GpuInventory, TheDriversInformationNamesEachGpusDeviceMinor) {
  const std::string information =
      "Model: \t\t NVIDIA A100-SXM4-80GB\n"
      "IRQ:   \t\t 172\n"
      "GPU UUID: \t GPU-5f3d1c2e-8a7b-4c1d-9e0f-123456789abc\n"
      "Video BIOS: \t 92.00.36.00.10\n"
      "Bus Type: \t PCIe\n"
      "DMA Size: \t 47 bits\n"
      "DMA Mask: \t 0x7fffffffffff\n"
      "Bus Location: \t 0000:3b:00.0\n"
      "Device Minor: \t 3\n"
      "GPU Excluded:\t No\n";
  auto [uuid, minor] = ParseNvidiaGpuInformation(information);
  EXPECT_EQ(uuid, "GPU-5f3d1c2e-8a7b-4c1d-9e0f-123456789abc");
  EXPECT_EQ(minor, 3);
  EXPECT_EQ(ParseNvidiaGpuInformation("Model: x\nDevice Minor: lots\n").second, -1);
  // Pool index 0 is the GPU whose node is /dev/nvidia3; one the driver does
  // not name (or a logical one) keeps its index.
  std::vector<GpuDevice> gpus = {{0, "GPU-5f3d1c2e-8a7b-4c1d-9e0f-123456789abc", "A100"},
                                 {1, "GPU-other", "A100"}};
  auto minors = DeviceMinorsByIndex(gpus, {{"GPU-5f3d1c2e-8a7b-4c1d-9e0f-123456789abc", 3}});
  EXPECT_EQ(minors.at(0), 3);
  EXPECT_EQ(minors.at(1), 1);
  EXPECT_TRUE(ReadNvidiaDeviceMinors("/nonexistent").empty());
}

}  // namespace
}  // namespace headway
