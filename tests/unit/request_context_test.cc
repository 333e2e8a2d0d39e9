// Who is asking, as every route gets it (api/request_context.h): what a
// caller may see, change and create follows from the token alone.
#include "api/request_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace headway::api {
namespace {

using ::testing::HasSubstr;

UserToken Token(const std::string& name, const std::string& team, Role role,
                const std::string& parent = "") {
  UserToken t;
  t.name = name;
  t.team = team;
  t.role = role;
  t.parent = parent;
  return t;
}

TEST(RequestContext, WithoutAuthenticationTheCallerMayDoEverything) {
  RequestContext anyone;
  EXPECT_TRUE(anyone.MaySee("a").ok());
  EXPECT_TRUE(anyone.MayChange("a").ok());
  EXPECT_TRUE(anyone.RequireAdmin().ok());
  EXPECT_EQ(anyone.VisibleTeam(), "");
  EXPECT_EQ(anyone.Creator(), "");
  JobSpec spec;
  spec.priority = 1000000;
  EXPECT_TRUE(anyone.Admit(spec).ok());
}

TEST(RequestContext, AMemberSeesAndChangesItsTeamOnly) {
  const UserToken bob = Token("bob", "b", Role::kMember);
  const std::string secret = "s";
  TeamPolicy policy;
  RequestContext ctx(bob, secret, policy);
  EXPECT_TRUE(ctx.MaySee("b").ok());
  EXPECT_THAT(ctx.MaySee("a").message(), HasSubstr("sees team 'b' only, not 'a'"));
  EXPECT_THAT(ctx.MayChange("a").message(), HasSubstr("may not change team 'a'"));
  EXPECT_EQ(ctx.VisibleTeam(), "b");
  EXPECT_THAT(ctx.RequireAdmin().message(), HasSubstr("needs an admin token"));
  EXPECT_EQ(*ctx.secret(), "s");
}

TEST(RequestContext, AMembersWorkGoesToItsTeamWithinItsBounds) {
  const UserToken bob = Token("bob", "b", Role::kMember);
  const std::string secret = "s";
  TeamPolicy policy;
  RequestContext ctx(bob, secret, policy);
  JobSpec spec;  // no team: the member's
  ASSERT_TRUE(ctx.Admit(spec).ok());
  EXPECT_EQ(spec.team, "b");
  PoolRequest workflow{JobSpec().team, 1000000};
  EXPECT_THAT(ctx.Admit(workflow).message(), HasSubstr("priority"));
  PoolRequest plain{JobSpec().team, 0};
  ASSERT_TRUE(ctx.Admit(plain).ok());
  EXPECT_EQ(plain.team, "b");
}

TEST(RequestContext, ASessionActsForTheTokenItWasMadeFrom) {
  const UserToken session = Token("sess-1", "b", Role::kMember, "bob");
  const std::string secret = "s";
  TeamPolicy policy;
  RequestContext ctx(session, secret, policy);
  EXPECT_EQ(ctx.Owner(), "bob");
  EXPECT_EQ(ctx.Creator(), "user/bob");
}

TEST(RequestContext, AViewerOfEveryTeamSeesAllAndChangesNothing) {
  const UserToken watcher = Token("grafana", kEveryTeam, Role::kViewer);
  const std::string secret = "s";
  TeamPolicy policy;
  RequestContext ctx(watcher, secret, policy);
  EXPECT_TRUE(ctx.MaySee("a").ok());
  EXPECT_EQ(ctx.VisibleTeam(), "");
  EXPECT_FALSE(ctx.MayChange("a").ok());
}

TEST(RequestContext, AJobsOwnTokenNamesTheJob) {
  Job job;
  job.spec.name = "train";
  job.spec.team = "b";
  RequestContext ctx(job);
  ASSERT_NE(ctx.job(), nullptr);
  EXPECT_EQ(ctx.job()->spec.team, "b");
  EXPECT_EQ(ctx.caller(), nullptr);
}

}  // namespace
}  // namespace headway::api
