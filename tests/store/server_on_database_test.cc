// A whole server on PostgreSQL and on MariaDB (--store postgresql://...,
// mysql://...): jobs, their progress and events are kept there, not in the
// data directory, and a crashed server finds them all when it starts again.
#include <gtest/gtest.h>

#include <filesystem>

#include "test_databases.h"
#include "test_server.h"

namespace headway {
namespace {

using testing::TestServer;

class ServerOnDatabase : public ::testing::TestWithParam<std::string> {};

TEST_P(ServerOnDatabase, JobsTheirProgressAndEventsSurviveACrash) {
  const std::string url = testing::CreateTestDatabase(GetParam(), "server");
  ASSERT_FALSE(url.empty());
  {
    TestServer server(1, {"--store", url});
    server.Submit(R"(
name: counted
command: "for i in 1 2 3 4 5; do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 5, \\\"loss\\\": 0.$i}\"; done"
resources: {gpus_per_process: 1}
)");
    ASSERT_TRUE(server.WaitForState("counted", "Succeeded")) << server.ServerLog();
    ASSERT_TRUE(testing::WaitFor([&] { return server.Job("counted")["progress"]["step"] == 5; }));
    EXPECT_FALSE(std::filesystem::exists(server.data_dir() + "/headway.db"));
    EXPECT_NE(server.ServerLog().find("store: " + GetParam() + "://"), std::string::npos);

    server.Kill();
    server.Restart();
    nlohmann::json job = server.Job("counted");
    EXPECT_EQ(job["state"], "Succeeded") << job.dump(2);
    EXPECT_EQ(job["progress"]["step"], 5);
    EXPECT_TRUE(server.HasEvent("counted", "Submitted"));
    // A second job after the restart gets the next place in the order.
    server.Submit("name: after\ncommand: \"true\"\n");
    ASSERT_TRUE(server.WaitForState("after", "Succeeded"));
    auto listed = server.Cli({"get", "jobs", "-o", "name"});
    EXPECT_EQ(listed.out, "counted\nafter\n");
  }
  testing::DropTestDatabase(GetParam(), url);
}

INSTANTIATE_TEST_SUITE_P(Backends, ServerOnDatabase, ::testing::Values("postgresql", "mysql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(ServerOnDatabase, AnUnreachableDatabaseStopsTheServerWithAClearErrorAndNoPassword) {
  testing::CommandResult result = testing::RunCommand(
      {HEADWAY_BIN, "server", "--data-dir", ::testing::TempDir() + "/unreachable", "--listen",
       "127.0.0.1:0", "--store", "postgresql://ann:s3cret@127.0.0.1:1/headway?connect_timeout=2"});
  const std::string printed = result.out + result.err;
  EXPECT_NE(result.exit_code, 0);
  EXPECT_NE(printed.find("cannot connect to PostgreSQL"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("s3cret"), std::string::npos) << printed;
}

}  // namespace
}  // namespace headway
