// Two servers on one database (PostgreSQL, then MariaDB) and one data
// directory: one leads, the other passes requests on to it; when the leader
// is killed the other takes over, with every acknowledged job and report,
// and runs nothing a second time.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "test_databases.h"
#include "test_server.h"

namespace headway {
namespace {

using testing::TestServer;
using testing::WaitFor;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int CountLines(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) ++n;
  return n;
}

class Replicas : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = testing::CreateTestDatabase(GetParam(), "replicas");
    ASSERT_FALSE(url_.empty());
  }
  void TearDown() override { testing::DropTestDatabase(GetParam(), url_); }
  std::string url_;
};

TEST_P(Replicas, WhenTheLeaderIsKilledTheOtherTakesOverWithEveryJobAndReportAndRunsNothingTwice) {
  TestServer first(2, {"--store", url_});
  TestServer second(first, {"--store", url_});
  ASSERT_NE(second.ServerLog().find("following the leader at " + first.url()), std::string::npos)
      << second.ServerLog();

  // Submitted through the replica, which passes it on: the leader runs it.
  // Each start of the job leaves a line in `starts`; it reports 60 steps,
  // one each 0.1 s, and ends on its own.
  const std::string starts = first.work_dir() + "/starts";
  second.Submit(
      R"(
name: counter
command: "echo started >> )" +
      starts +
      R"(; for i in $(seq 1 60); do echo \"HEADWAY {\\\"step\\\": $i, \\\"total_steps\\\": 60, \\\"loss\\\": $i}\"; sleep 0.1; done"
resources: {gpus_per_process: 1}
)");
  for (int i = 0; i < 10; ++i)
    second.Submit("name: quick-" + std::to_string(i) + "\ncommand: \"true\"\n");
  ASSERT_TRUE(WaitFor([&] {
    return first.Job("counter")["progress"]["step"].is_number() &&
           first.Job("counter")["progress"]["step"].get<int>() >= 5;
  })) << first.Job("counter").dump(2);
  // Reads through the replica see what the leader sees.
  const int acknowledged = second.Job("counter")["progress"]["step"].get<int>();
  EXPECT_GE(acknowledged, 5);

  const auto killed = std::chrono::steady_clock::now();
  first.Kill();
  ASSERT_TRUE(WaitFor([&] { return second.ServerLog().find("leading:") != std::string::npos; },
                      std::chrono::seconds(30)))
      << second.ServerLog();
  ASSERT_TRUE(WaitFor(
      [&] {
        return second.Job("counter").is_object() && second.Job("counter")["state"].is_string();
      },
      std::chrono::seconds(30)));
  const double takeover =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::cout << "[ TAKEOVER ] " << GetParam() << ": the replica answered as leader " << takeover
            << " s after the leader was killed\n";
  RecordProperty("takeover_seconds", std::to_string(takeover));

  ASSERT_TRUE(second.WaitForState("counter", "Succeeded", std::chrono::seconds(60)))
      << second.Job("counter").dump(2) << second.ServerLog();
  nlohmann::json job = second.Job("counter");
  EXPECT_EQ(job["progress"]["step"], 60);
  EXPECT_EQ(job["restarts"], 0);
  EXPECT_EQ(CountLines(starts), 1) << ReadAll(starts);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(second.WaitForState("quick-" + std::to_string(i), "Succeeded")) << i;
  }
  // Every point is stored, those the killed leader took in included: one
  // per step, 1 to 60, none lost and none twice.
  auto series = second.Http().Request("GET", "/api/v1/jobs/counter/metrics/loss");
  ASSERT_TRUE(series.ok());
  nlohmann::json points = nlohmann::json::parse(series->body)["points"];
  ASSERT_EQ(points.size(), 60u) << series->body;
  for (int i = 0; i < 60; ++i) EXPECT_EQ(points[i]["step"], i + 1);
}

// A leader cut off from the database (its session ended by the database,
// as a network partition or a database failover would) stops at once, so
// that it never acts beside the replica that takes the lead.
TEST_P(Replicas, ALeaderCutOffFromTheDatabaseStopsAndTheOtherLeads) {
  TestServer first(1, {"--store", url_});
  TestServer second(first, {"--store", url_});
  ASSERT_NE(second.ServerLog().find("following the leader"), std::string::npos);
  const std::string cut =
      GetParam() == "postgresql"
          ? "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND "
            "classid = 1212501348 AND objid = 1"
          : "";
  if (GetParam() == "postgresql") {
    ASSERT_EQ(testing::ExecAsAdmin(GetParam(), cut), "");
  } else {
    // MariaDB names the session holding the lock; KILL ends it.
    const std::string kill =
        "BEGIN NOT ATOMIC DECLARE id BIGINT DEFAULT IS_USED_LOCK('headway-leader'); "
        "IF id IS NOT NULL THEN KILL CONNECTION id; END IF; END";
    ASSERT_EQ(testing::ExecAsAdmin(GetParam(), kill), "");
  }
  ASSERT_TRUE(WaitFor([&] { return first.ServerLog().find("lost the lead") != std::string::npos; },
                      std::chrono::seconds(10)))
      << first.ServerLog();
  ASSERT_TRUE(WaitFor([&] { return second.ServerLog().find("leading:") != std::string::npos; },
                      std::chrono::seconds(10)))
      << second.ServerLog();
  second.Submit("name: after\ncommand: \"true\"\nresources: {gpus_per_process: 1}\n");
  EXPECT_TRUE(second.WaitForState("after", "Succeeded"));
}

INSTANTIATE_TEST_SUITE_P(Backends, Replicas, ::testing::Values("postgresql", "mysql"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace headway
