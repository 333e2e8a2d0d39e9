// Authorisation and team bounds as pure functions of (caller, verb, object):
// table-driven, no server.
#include "core/access.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/team_policy.h"

namespace headway {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

UserToken Token(Role role, std::string team, bool revoked = false) {
  UserToken t;
  t.name = "t";
  t.team = std::move(team);
  t.role = role;
  if (revoked) t.revoked_at = Time{};
  return t;
}

TEST(Access, WhoMayChangeAndForceStopATeamsJobs) {
  struct Case {
    const char* what;
    UserToken who;
    const char* team;
    bool modify;
    bool force_stop;
  };
  const Case cases[] = {
      {"admin, any team", Token(Role::kAdmin, ""), "vision", true, true},
      {"admin of a team, another team", Token(Role::kAdmin, "nlp"), "vision", true, true},
      {"member, own team", Token(Role::kMember, "vision"), "vision", true, false},
      {"member, other team", Token(Role::kMember, "nlp"), "vision", false, false},
      {"viewer, own team", Token(Role::kViewer, "vision"), "vision", false, false},
      {"viewer of every team", Token(Role::kViewer, "*"), "vision", false, false},
      {"revoked admin", Token(Role::kAdmin, "", /*revoked=*/true), "vision", false, false},
      {"revoked member", Token(Role::kMember, "vision", /*revoked=*/true), "vision", false, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MayModify(c.who, c.team), c.modify) << c.what;
    EXPECT_EQ(MayForceStop(c.who, c.team), c.force_stop) << c.what;
  }
}

JobSpec Spec(const std::string& team, int priority, Duration grace,
             std::optional<Duration> warning = std::nullopt) {
  JobSpec s;
  s.name = "j";
  s.team = team;
  s.priority = priority;
  s.termination_grace = grace;
  s.checkpoint_warning = warning;
  return s;
}

TEST(TeamBounds, MembersStayWithinTheirTeamsBoundsAdminsAreNotBounded) {
  auto policy = ParseTeamPolicy({"vision=100", "-5", "nlp=-1"}, {"vision=1h", "2m"});
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  struct Case {
    const char* what;
    Role role;
    JobSpec spec;
    const char* field;  // "" when allowed
  };
  const Case cases[] = {
      {"member at the team's priority bound", Role::kMember, Spec("vision", 100, 30s), ""},
      {"member above it", Role::kMember, Spec("vision", 101, 30s), "priority"},
      {"member may lower priority", Role::kMember, Spec("vision", -1000000, 30s), ""},
      {"default bound for other teams", Role::kMember, Spec("audio", -5, 30s), ""},
      {"above the default bound", Role::kMember, Spec("audio", -4, 30s), "priority"},
      {"a negative team bound", Role::kMember, Spec("nlp", 0, 30s), "priority"},
      {"grace at the team's bound", Role::kMember, Spec("vision", 0, 1h), ""},
      {"grace above it", Role::kMember, Spec("vision", 0, 1h + 1s), "termination_grace"},
      {"grace above the default", Role::kMember, Spec("audio", -5, 3min), "termination_grace"},
      {"checkpoint warning above", Role::kMember, Spec("audio", -5, 1min, 100000h),
       "checkpoint_warning"},
      {"checkpoint warning within", Role::kMember, Spec("audio", -5, 1min, 2min), ""},
      {"viewers are bounded like members", Role::kViewer, Spec("vision", 101, 30s), "priority"},
      {"admin: priority", Role::kAdmin, Spec("vision", 1000000, 30s), ""},
      {"admin: grace", Role::kAdmin, Spec("vision", 0, 100000h, 100000h), ""},
  };
  for (const Case& c : cases) {
    UserToken who = Token(c.role, c.spec.team);
    Status s = CheckTeamBounds(who, c.spec, *policy);
    if (std::string(c.field).empty()) {
      EXPECT_TRUE(s.ok()) << c.what << ": " << s.ToString();
    } else {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
      EXPECT_EQ(s.field(), c.field) << c.what;
    }
  }
}

TEST(TeamBounds, WithoutAdminSettingsMembersMayNotRaisePriorityAndGraceIsTenMinutes) {
  TeamPolicy policy;
  EXPECT_EQ(policy.For("vision").max_priority, 0);
  EXPECT_EQ(policy.For("vision").max_grace, 10min);
  UserToken member = Token(Role::kMember, "vision");
  Status s = CheckTeamBounds(member, Spec("vision", 1000000, 30s), policy);
  EXPECT_EQ(s.message(),
            "priority 1000000 is above team vision's limit of 0 for members; an admin can raise "
            "it with --max-priority vision=N");
  s = CheckTeamBounds(member, Spec("vision", 0, 100000h), policy);
  EXPECT_EQ(s.field(), "termination_grace");
  EXPECT_THAT(s.message(), HasSubstr("limit of 10m"));
  EXPECT_THAT(s.message(), HasSubstr("--max-grace vision=DURATION"));
  EXPECT_TRUE(CheckTeamBounds(member, Spec("vision", 0, 30s), policy).ok())
      << "the spec's defaults are within the default bounds";
}

TEST(TeamBounds, FlagsAreParsedStrictly) {
  struct Case {
    std::vector<std::string> priority, grace;
    bool ok;
  };
  const Case cases[] = {
      {{}, {}, true},
      {{"10", "vision=20"}, {"30m", "vision=2h"}, true},
      {{"vision=x"}, {}, false},
      {{"vision="}, {}, false},
      {{"=5"}, {}, false},
      {{"5", "6"}, {}, false},
      {{"vision=5", "vision=6"}, {}, false},
      {{"2000000"}, {}, false},
      {{"1.5"}, {}, false},
      {{}, {"forever"}, false},
      {{}, {"vision=-1m"}, false},
      {{}, {"1m", "2m"}, false},
      {{}, {"vision=1m", "vision=1m"}, false},
  };
  for (const Case& c : cases) {
    auto p = ParseTeamPolicy(c.priority, c.grace);
    EXPECT_EQ(p.ok(), c.ok) << ::testing::PrintToString(c.priority) << " "
                            << ::testing::PrintToString(c.grace) << ": " << p.status().ToString();
  }
  auto p = ParseTeamPolicy({"vision=20"}, {"vision=90s"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->For("vision").max_priority, 20);
  EXPECT_EQ(p->For("vision").max_grace, 90s);
  EXPECT_EQ(p->For("nlp").max_priority, 0);
  EXPECT_EQ(p->For("nlp").max_grace, 10min);
}

}  // namespace
}  // namespace headway
