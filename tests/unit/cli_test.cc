// The client's pure parts: table layout, the dashboard's number formats,
// sorting, global flags, suggestions, the top screen, the config file and
// the completion script.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli/args.h"
#include "cli/completion.h"
#include "cli/config.h"
#include "cli/job_table.h"
#include "cli/output.h"
#include "cli/top.h"
#include "core/terminal_text.h"

namespace headway::cli {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The display column where `needle` starts on `line`.
std::size_t ColumnOf(const std::string& line, const std::string& needle) {
  std::size_t at = line.find(needle);
  EXPECT_NE(at, std::string::npos) << needle << " in " << line;
  return DisplayWidth(line.substr(0, at));
}

TEST(CliTable, ColumnsLineUpByDisplayWidthNotBytes) {
  // Before: a bar of 8 three-byte cells made its column 16 bytes wider than
  // it shows, so every row without a bar was pushed 16 columns right.
  std::string table =
      FormatTable({"NAME", "PROGRESS", "STEP"},
                  {{"a", " 42% \u2588\u2588\u2588\u2591\u2591\u2591\u2591\u2591", "420"},
                   {"b", "-", "7"},
                   {"\xe6\x97\xa5\xe6\x9c\xac", "-", "9"}});
  auto lines = Lines(table);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(ColumnOf(lines[0], "STEP"), ColumnOf(lines[1], "420"));
  EXPECT_EQ(ColumnOf(lines[0], "STEP"), ColumnOf(lines[2], "7"));
  EXPECT_EQ(ColumnOf(lines[0], "STEP"), ColumnOf(lines[3], "9"));
  EXPECT_EQ(ColumnOf(lines[0], "PROGRESS"), ColumnOf(lines[3], "-"));
  EXPECT_EQ(ColumnOf(lines[0], "STEP"), 4u + 3u + 13u + 3u);
}

TEST(CliTable, NoHeadersKeepsTheColumnsTheHeaderWouldHaveSet) {
  std::string with = FormatTable({"NAME", "STATE"}, {{"a", "Running"}});
  std::string without = FormatTable({"NAME", "STATE"}, {{"a", "Running"}}, false);
  EXPECT_EQ(without, Lines(with)[1] + "\n");
}

// Expected values printed by web/format.js itself (node), so the CLI and the
// dashboard show the same text.
TEST(CliFormat, MetricsLikeTheDashboard) {
  const std::pair<double, const char*> cases[] = {{0.0909090909, "0.09091"},
                                                  {1.0 / 11, "0.09091"},
                                                  {12345.6, "12350"},
                                                  {123456, "1.23e+5"},
                                                  {0.0004, "4.00e-4"},
                                                  {-0.5, "-0.5"},
                                                  {1234.5, "1235"},
                                                  {99999.4, "100000"},
                                                  {0.001, "0.001"},
                                                  {1e-7, "1.00e-7"},
                                                  {2.5e10, "2.50e+10"},
                                                  {0.1 + 0.2, "0.3"},
                                                  {3, "3"},
                                                  {1.23456789, "1.235"},
                                                  {0, "0"}};
  for (const auto& [value, shown] : cases) EXPECT_EQ(FormatMetric(json(value)), shown) << value;
  EXPECT_EQ(FormatMetric(json("NaN")), "NaN");
  EXPECT_EQ(FormatMetric(json()), "-");
}

TEST(CliFormat, DurationsAgesPercentsAndFixedLikeTheDashboard) {
  const std::pair<double, const char*> durations[] = {
      {0, "0s"},         {0.4, "0s"},      {42, "42s"},       {59.6, "1m00s"},
      {252, "4m12s"},    {3599, "59m59s"}, {3600, "1h00m"},   {7500, "2h05m"},
      {86399, "23h59m"}, {86400, "1d00h"}, {273600, "3d04h"}, {-5, "0s"}};
  for (const auto& [seconds, shown] : durations)
    EXPECT_EQ(FormatSeconds(seconds), shown) << seconds;
  Time now = *ParseRfc3339("2026-12-03T10:00:00Z");
  EXPECT_EQ(Age("2026-12-03T09:55:48Z", now), "4m12s");
  EXPECT_EQ(Age("yesterday", now), "-");
  EXPECT_EQ(FormatPercent(0), "0%");
  EXPECT_EQ(FormatPercent(41.99), "41%");  // rounded down, as the dashboard does
  EXPECT_EQ(FormatPercent(100), "100%");
  EXPECT_EQ(FormatFixed(json(1.5), 2), "1.50");
  EXPECT_EQ(FormatFixed(json(2.0), 2), "2");
  EXPECT_EQ(FormatFixed(json(812.25), 1), "812.3");  // a tie goes up, as toFixed does
  EXPECT_EQ(FormatFixed(json(0.123), 2), "0.12");
}

json Job(const std::string& name, std::optional<double> percent, int gpus,
         const std::string& created, std::optional<double> eta = std::nullopt) {
  json progress = json::object();
  if (percent) progress["percent"] = *percent;
  if (eta) progress["eta_seconds"] = *eta;
  return {{"name", name},         {"state", "Running"}, {"health", "Progressing"},
          {"progress", progress}, {"gpus", gpus},       {"created_at", created},
          {"team", "t"},          {"restarts", 0}};
}

std::vector<std::string> Names(const std::vector<json>& jobs) {
  std::vector<std::string> names;
  for (const auto& j : jobs) names.push_back(j["name"]);
  return names;
}

TEST(CliSort, SortsByColumnOrPathWithMissingValuesLast) {
  std::vector<json> jobs = {Job("b", 50, 2, "2026-12-03T09:00:00Z", 60),
                            Job("c", std::nullopt, 8, "2026-12-03T08:00:00Z"),
                            Job("a", 10, 1, "2026-12-03T10:00:00Z", 600)};
  ASSERT_TRUE(SortJobs(jobs, "name").ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(SortJobs(jobs, "progress", /*descending=*/true).ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"b", "a", "c"}));
  ASSERT_TRUE(SortJobs(jobs, "PROGRESS").ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(SortJobs(jobs, "eta").ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"b", "a", "c"}));
  ASSERT_TRUE(SortJobs(jobs, "gpus").ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(SortJobs(jobs, "age").ok());  // youngest first, as AGE reads
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_TRUE(SortJobs(jobs, ".progress.percent").ok());
  EXPECT_EQ(Names(jobs), (std::vector<std::string>{"a", "b", "c"}));
  Status bad = SortJobs(jobs, "colour");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("progress"));
}

TEST(CliArgs, GlobalFlagsAreTakenFromAnywhere) {
  const auto& flags = GlobalValueFlags();
  using V = std::vector<std::string>;
  EXPECT_EQ(HoistGlobalFlags(V{"get", "jobs", "--server", "http://h:1"}, flags),
            (V{"--server", "http://h:1", "get", "jobs"}));
  EXPECT_EQ(HoistGlobalFlags(V{"logs", "--token=abc", "x", "-f", "--cacert", "ca.pem"}, flags),
            (V{"--token=abc", "--cacert", "ca.pem", "logs", "x", "-f"}));
  // After "--" nothing is a flag of ours.
  EXPECT_EQ(HoistGlobalFlags(V{"get", "--", "--server", "x"}, flags),
            (V{"get", "--", "--server", "x"}));
  // A flag of another name that starts the same is left alone.
  EXPECT_EQ(HoistGlobalFlags(V{"get", "--servers", "x"}, flags), (V{"get", "--servers", "x"}));
}

TEST(CliArgs, SuggestsTheNearestCommand) {
  std::vector<std::string> commands = {"server", "token",    "submit",  "get",
                                       "exp",    "describe", "logs",    "stop",
                                       "top",    "wait",     "version", "completion"};
  EXPECT_EQ(ClosestMatch("lgos", commands), "logs");
  EXPECT_EQ(ClosestMatch("log", commands), "logs");
  EXPECT_EQ(ClosestMatch("sumbit", commands), "submit");
  EXPECT_EQ(ClosestMatch("decsribe", commands), "describe");
  EXPECT_EQ(ClosestMatch("vers", commands), "version");
  EXPECT_EQ(ClosestMatch("kubernetes", commands), "");
}

TEST(CliArgs, HelpShowsPlaceholdersNotParserTypes) {
  CLI::App app{"x"};
  app.formatter(CleanHelpFormatter());
  int gpus = 0;
  double floor = 60;
  std::string output;
  bool flag = false;
  app.add_option("--gpus", gpus, "GPUs")->check(CLI::Range(0, 4096));
  app.add_option("--floor", floor, "seconds")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("-o,--output", output, "format")->check(CLI::IsMember({"wide", "json"}));
  app.add_flag("--force", flag, "now");
  std::string help = app.help();
  EXPECT_THAT(help, HasSubstr("--gpus N "));
  EXPECT_THAT(help, HasSubstr("--floor NUMBER "));
  EXPECT_THAT(help, HasSubstr("seconds (default 60)"));
  EXPECT_THAT(help, HasSubstr("-o,--output {wide|json}"));
  EXPECT_THAT(help, Not(HasSubstr("INT")));
  EXPECT_THAT(help, Not(HasSubstr("FLOAT")));
  EXPECT_THAT(help, Not(HasSubstr("[0 - 4096]")));
  EXPECT_THAT(help, Not(HasSubstr("--force VALUE")));
}

TEST(CliTop, FitsTheTerminalAndSorts) {
  std::vector<json> jobs;
  for (int i = 0; i < 30; ++i) {
    jobs.push_back(
        Job("job-" + std::to_string(100 + i), i * 3, 1, "2026-12-03T09:00:00Z", 100 - i));
  }
  TopView view;
  view.rows = 10;
  view.columns = 60;
  view.sort_key = "progress";
  view.descending = true;
  view.server = "http://127.0.0.1:8080";
  Time now = *ParseRfc3339("2026-12-03T10:00:00Z");
  auto lines = Lines(RenderTop(jobs, view, now));
  ASSERT_EQ(lines.size(), 10u);  // never more than the terminal holds
  for (const auto& line : lines) EXPECT_LE(DisplayWidth(line), 60u) << line;
  EXPECT_THAT(lines[2], HasSubstr("NAME"));     // the header stays on screen
  EXPECT_THAT(lines[3], HasSubstr("job-129"));  // most progress first
  EXPECT_THAT(lines[9], HasSubstr("24 more"));
  view.sort_key = "name";
  view.descending = false;
  lines = Lines(RenderTop(jobs, view, now));
  EXPECT_THAT(lines[3], HasSubstr("job-100"));
  EXPECT_THAT(lines[0], HasSubstr("sort: name"));
}

// 33 jobs, 30 of them ended at 100%, on a 24-row terminal: sorted by
// progress, the ended ones would fill the screen. Active jobs come first,
// then the most recently ended.
TEST(CliTop, ActiveJobsComeFirstThenTheMostRecentlyEnded) {
  std::vector<json> jobs;
  for (int i = 0; i < 30; ++i) {
    json done = Job("done-" + std::to_string(10 + i), 100, 0, "2026-12-03T08:00:00Z");
    done["state"] = i % 2 ? "Succeeded" : "Failed";
    done["finished_at"] = "2026-12-03T09:" + std::to_string(10 + i) + ":00Z";
    jobs.push_back(done);
  }
  jobs.push_back(Job("running-a", 40, 1, "2026-12-03T09:00:00Z"));
  json waiting = Job("waiting", std::nullopt, 1, "2026-12-03T09:30:00Z");
  waiting["state"] = "Queued";
  jobs.push_back(waiting);
  jobs.push_back(Job("running-b", 70, 1, "2026-12-03T09:00:00Z"));
  TopView view;
  view.rows = 24;
  view.columns = 100;
  view.sort_key = "progress";
  view.descending = true;
  auto lines = Lines(RenderTop(jobs, view, *ParseRfc3339("2026-12-03T10:00:00Z")));
  EXPECT_THAT(lines[3], HasSubstr("running-b"));
  EXPECT_THAT(lines[4], HasSubstr("running-a"));
  EXPECT_THAT(lines[5], HasSubstr("waiting"));
  EXPECT_THAT(lines[6], HasSubstr("done-39"));  // ended last, at 09:39
  EXPECT_THAT(lines[7], HasSubstr("done-38"));
}

TEST(CliTop, ShowsItsNoticeAndNoEscapes) {
  TopView view;
  view.notice = "server unreachable; reconnecting in 1s";
  std::string screen = RenderTop({}, view, *ParseRfc3339("2026-12-03T10:00:00Z"));
  EXPECT_THAT(screen, HasSubstr("reconnecting"));
  EXPECT_THAT(screen, HasSubstr("No jobs."));
  EXPECT_EQ(screen.find('\x1b'), std::string::npos);
}

class CliConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("headway-cli-config-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "headway");
    ::setenv("XDG_CONFIG_HOME", dir_.c_str(), 1);
    ::unsetenv("HEADWAY_CONFIG");
  }
  void TearDown() override {
    ::unsetenv("XDG_CONFIG_HOME");
    std::filesystem::remove_all(dir_);
  }
  std::string Write(const std::string& text, mode_t mode) {
    std::string path = (dir_ / "headway" / "config").string();
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(CliConfig, ReadsServerTokenAndCaFromTheXdgPath) {
  std::string path =
      Write("server: https://hw.example:8443\ntoken: hw_secret\ncacert: ca.pem\n", 0600);
  EXPECT_EQ(ConfigPath(""), path);
  auto config = LoadClientConfig("");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->server, "https://hw.example:8443");
  EXPECT_EQ(config->token, "hw_secret");
  EXPECT_EQ(config->cacert, (dir_ / "headway" / "ca.pem").string());
  EXPECT_TRUE(config->warnings.empty());
}

TEST_F(CliConfig, AMissingDefaultFileIsNoErrorButANamedOneIs) {
  auto config = LoadClientConfig("");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->path, "");
  EXPECT_FALSE(LoadClientConfig((dir_ / "nope").string()).ok());
}

TEST_F(CliConfig, AFileOthersCanReadIsRefusedWhenItHoldsAToken) {
  Write("server: http://h:1\ntoken: hw_secret\n", 0644);
  auto config = LoadClientConfig("");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(config.status().message(), HasSubstr("chmod 600"));
  EXPECT_THAT(config.status().message(), Not(HasSubstr("hw_secret")));
  Write("server: http://h:1\n", 0644);
  config = LoadClientConfig("");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->warnings.size(), 1u);
}

TEST_F(CliConfig, UnknownKeysAndBadYamlAreNamed) {
  Write("sever: http://h:1\n", 0600);
  auto config = LoadClientConfig("");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("unknown key 'sever'"));
  Write("server: [unclosed\n", 0600);
  EXPECT_FALSE(LoadClientConfig("").ok());
}

TEST(CliCompletion, ScriptsNameEveryCommandAndFlag) {
  CLI::App app{"x"};
  app.add_subcommand("server", "s");
  auto* get = app.add_subcommand("get", "g");
  std::string resource;
  bool watch = false;
  get->add_option("resource", resource, "r")->check(CLI::IsMember({"jobs", "queues"}));
  get->add_flag("-w,--watch", watch, "w");
  auto* token = app.add_subcommand("token", "t");
  token->add_subcommand("create", "c");
  std::string bash = CompletionScript(app, "bash");
  EXPECT_THAT(bash, HasSubstr("complete -F _headway headway"));
  EXPECT_THAT(bash, HasSubstr("\"headway get\") words=\"--help -h jobs queues --watch -w\""));
  EXPECT_THAT(bash, HasSubstr("\"headway token\") words=\"create --help -h\""));
  EXPECT_THAT(bash, HasSubstr("--server"));
  std::string zsh = CompletionScript(app, "zsh");
  EXPECT_THAT(zsh, HasSubstr("#compdef headway"));
  EXPECT_THAT(zsh, HasSubstr("\"headway get\") choices=("));
}

}  // namespace
}  // namespace headway::cli
