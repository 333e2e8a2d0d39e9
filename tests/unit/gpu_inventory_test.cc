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
                                "NVIDIA driver.\n").empty());
  EXPECT_TRUE(ParseNvidiaSmiCsv("No devices were found\n").empty());
  EXPECT_EQ(ParseNvidiaSmiCsv("warning, something, odd\n0, GPU-x, A100\n").size(), 1u);
}

TEST(GpuInventory, ReadsUtilisationAndSkipsGpusWithoutAReading) {
  auto percent = ParseGpuUtilizationCsv("0, 37\n1, [N/A]\n2, 100\r\n3, [Not Supported]\n"
                                        "4, 250\n5, nan\nNo devices were found\n");
  EXPECT_EQ(percent, (std::map<int, double>{{0, 37}, {2, 100}}));
  EXPECT_TRUE(ParseGpuUtilizationCsv("").empty());
}

TEST(GpuInventory, LogicalGpusAreNumberedFromZero) {
  auto gpus = LogicalGpus(3);
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[2].index, 2);
}

}  // namespace
}  // namespace headway
