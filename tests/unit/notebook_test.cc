// The notebook rules without a server: profiles as an admin writes them,
// and when an idle notebook is warned and culled, on a fake clock.
#include "core/notebook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace headway {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(NotebookProfiles, AreReadWithEveryField) {
  auto profiles = ParseNotebookProfiles(R"(profiles:
  - name: small
    description: "1 GPU, 8 CPUs"
    gpus: 1
    cpus: 8
    memory: 32Gi
    time_limit: 12h
    queue: interactive
    env: {HF_HOME: /data/hf}
    idle_timeout: 1h
    cull_warning: 10m
    gpu_idle_below_percent: 3
  - name: cpu
)");
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  ASSERT_EQ(profiles->size(), 2u);
  const NotebookProfile& small = (*profiles)[0];
  EXPECT_EQ(small.gpus, 1);
  EXPECT_EQ(small.cpus, 8);
  EXPECT_EQ(small.memory_bytes, 32LL << 30);
  EXPECT_EQ(small.time_limit, Duration(12h));
  EXPECT_EQ(small.env.at("HF_HOME"), "/data/hf");
  EXPECT_EQ(small.idle_timeout, Duration(1h));
  EXPECT_EQ(small.cull_warning, Duration(10min));
  EXPECT_EQ(small.gpu_idle_below_percent, 3);
  EXPECT_EQ((*profiles)[1].gpus, 0);
  EXPECT_EQ((*profiles)[1].idle_timeout, Duration(1h)) << "the default";
}

TEST(NotebookProfiles, AnEmptyFileGivesTheDefaultProfile) {
  auto profiles = ParseNotebookProfiles("");
  ASSERT_TRUE(profiles.ok());
  ASSERT_EQ(profiles->size(), 1u);
  EXPECT_EQ(profiles->front().name, "default");
}

TEST(NotebookProfiles, MistakesAreNamedWithTheirField) {
  auto check = [](const char* yaml, const char* message) {
    auto p = ParseNotebookProfiles(yaml);
    ASSERT_FALSE(p.ok()) << yaml;
    EXPECT_THAT(p.status().ToString(), HasSubstr(message)) << yaml;
  };
  check("profiles:\n  - name: a\n    gpu: 1\n", "gpu");
  check("profiles:\n  - name: Big GPU\n", "profiles[0].name");
  check("profiles:\n  - name: a\n  - name: a\n", "defined twice");
  check("profiles:\n  - name: a\n    idle_timeout: soon\n", "idle_timeout");
  check("profiles:\n  - name: a\n    idle_timeout: 5m\n    cull_warning: 10m\n",
        "must not be longer than idle_timeout");
  check("profiles:\n  - name: a\n    gpu_idle_below_percent: 120\n", "between 0 and 100");
  check("profiles: []\n", "non-empty list");
  check("[1, 2]", "map with 'profiles'");
  check("profiles:\n  - name: a\n    gpus: -1\n", "gpus");
  // The same memory sizes as a job's, with the same lower bound, said.
  check("profiles:\n  - name: a\n    memory: 1Mi\n", "(at least 4Mi)");
}

class IdleRule : public ::testing::Test {
 protected:
  IdleRule() {
    profile.idle_timeout = 60min;
    profile.cull_warning = 10min;
    activity.started_at = clock.Now();
  }
  IdleVerdict At(Duration after_start) {
    return DecideIdle(activity, warned_at, profile, activity.started_at + after_start);
  }
  ManualClock clock{FromUnixMillis(1796400000000)};
  NotebookProfile profile;
  NotebookActivity activity;
  std::optional<Time> warned_at;
};

TEST_F(IdleRule, WarnsBeforeTheTimeoutThenCullsAtIt) {
  EXPECT_EQ(At(49min).action, IdleVerdict::Action::kNone);
  IdleVerdict warn = At(50min);
  EXPECT_EQ(warn.action, IdleVerdict::Action::kWarn);
  EXPECT_EQ(warn.idle_for, Duration(50min));
  warned_at = activity.started_at + 50min;
  EXPECT_EQ(At(55min).action, IdleVerdict::Action::kNone) << "warned once per idle spell";
  EXPECT_EQ(At(60min).action, IdleVerdict::Action::kCull);
}

TEST_F(IdleRule, KernelActivityStartsANewSpellAndAnOldWarningNoLongerCounts) {
  warned_at = activity.started_at + 50min;
  activity.kernel_activity = activity.started_at + 55min;
  EXPECT_EQ(At(60min).action, IdleVerdict::Action::kNone);
  EXPECT_EQ(At(105min).action, IdleVerdict::Action::kWarn) << "50 min after the activity";
  EXPECT_EQ(At(200min).action, IdleVerdict::Action::kWarn)
      << "never culled on a warning of an earlier spell";
}

TEST_F(IdleRule, ABusyKernelOrGpuIsNeverIdle) {
  activity.kernel_busy = true;
  IdleVerdict busy = At(10h);
  EXPECT_EQ(busy.action, IdleVerdict::Action::kNone);
  EXPECT_EQ(busy.idle_for, Duration(0));
  activity.kernel_busy = false;
  activity.gpu_busy = true;
  EXPECT_EQ(At(10h).action, IdleVerdict::Action::kNone);
}

TEST_F(IdleRule, GpuUseAndOpeningCountAsActivity) {
  activity.gpu_busy_at = activity.started_at + 30min;
  EXPECT_EQ(At(60min).action, IdleVerdict::Action::kNone);
  EXPECT_EQ(At(80min).action, IdleVerdict::Action::kWarn);
  activity.opened_at = activity.started_at + 75min;
  EXPECT_EQ(At(80min).action, IdleVerdict::Action::kNone);
  EXPECT_EQ(At(80min).idle_since, activity.started_at + 75min);
}

TEST_F(IdleRule, ALateWarningStillGivesTheWholeWarning) {
  // The server was down when the warning was due: warned at 2 h, culled
  // only once the warning is 10 min old.
  EXPECT_EQ(At(2h).action, IdleVerdict::Action::kWarn);
  warned_at = activity.started_at + 2h;
  EXPECT_EQ(At(2h + 5min).action, IdleVerdict::Action::kNone);
  EXPECT_EQ(At(2h + 10min).action, IdleVerdict::Action::kCull);
}

TEST_F(IdleRule, ATimeoutOfZeroNeverCulls) {
  profile.idle_timeout = Duration(0);
  profile.cull_warning = Duration(0);
  EXPECT_EQ(At(1000h).action, IdleVerdict::Action::kNone);
}

TEST(NotebookNames, JobsAndHomes) {
  EXPECT_EQ(NotebookJobName("lab", 3), "notebook-lab-3");
  EXPECT_EQ(HomeOwner("user/alice"), "alice");
  EXPECT_EQ(HomeOwner("workflow/nightly"), "workflow-nightly");
  EXPECT_EQ(HomeOwner(""), "anonymous");
  EXPECT_EQ(HomeOwner("user/../../etc"), "------etc");
}

}  // namespace
}  // namespace headway
