// The header-only C++ SDK against the real server, and against a server
// that is not there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api/http_client.h"
#include "headway/reporter.hpp"
#include "test_server.h"

namespace headway::testing {
namespace {

TEST(CppSdk, ATrainingLoopReportsThroughTheSdk) {
  TestServer server;
  server.Submit(std::string("name: cpploop\ncommand: [\"") + TRAIN_LOOP_BIN +
                "\", \"200\", \"2\"]\n");
  ASSERT_TRUE(server.WaitForState("cpploop", "Succeeded", std::chrono::seconds(30)));
  auto job = server.Job("cpploop");
  EXPECT_EQ(job["progress"]["step"], 200);
  EXPECT_EQ(job["progress"]["percent"], 100.0);
  EXPECT_LT(job["progress"]["metrics"]["loss"].get<double>(), 1e-3);
  EXPECT_THAT(server.Cli({"logs", "cpploop"}).out,
              ::testing::HasSubstr("flushed=1 acknowledged=200"));
  api::HttpClient http = server.Http();
  auto series = http.Request("GET", "/api/v1/jobs/cpploop/metrics/loss");
  ASSERT_TRUE(series.ok());
  EXPECT_EQ(nlohmann::json::parse(series->body)["count"], 200);
}

TEST(CppSdk, ReportNeverBlocksWhenTheServerDoesNotAnswer) {
  int port = 0;
  int fd = SilentListener(port);
  Reporter::Options options;
  options.url = "http://127.0.0.1:" + std::to_string(port);
  options.job = "ghost";
  options.token = "t";
  options.max_queue = 100;
  options.exit_timeout = std::chrono::milliseconds(200);
  options.request_timeout = std::chrono::milliseconds(500);
  {
    Reporter reporter(options);
    ASSERT_TRUE(reporter.enabled());
    for (int step = 0; step < 10000; ++step) reporter.Report(step, {{"loss", 1.0}});
    EXPECT_FALSE(reporter.Flush(std::chrono::milliseconds(300)));
    EXPECT_EQ(reporter.acknowledged(), 0u);
    EXPECT_GE(reporter.dropped(), 10000u - 100u - 500u);  // bounded: all but the queue's worth
  }  // the destructor returns despite the dead server
  ::close(fd);
}

TEST(CppSdk, IsANoOpOutsideHeadwayAndOnOtherRanks) {
  Reporter::Options outside;
  outside.url = "";
  outside.job = "";
  unsetenv("HEADWAY_URL");
  unsetenv("HEADWAY_JOB");
  Reporter none(outside);
  EXPECT_FALSE(none.enabled());
  none.Report(1, {{"loss", 1.0}});
  EXPECT_TRUE(none.Flush(std::chrono::milliseconds(1)));
  setenv("RANK", "1", 1);
  Reporter::Options rank1;
  rank1.url = "http://127.0.0.1:1";
  rank1.job = "x";
  EXPECT_FALSE(Reporter(rank1).enabled());
  rank1.all_ranks = true;
  EXPECT_TRUE(Reporter(rank1).enabled());
  unsetenv("RANK");
}

}  // namespace
}  // namespace headway::testing
