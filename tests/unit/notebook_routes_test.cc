// The notebook proxy's small parts: cookies and one-time login codes.
#include "api/notebook_routes.h"

#include <gtest/gtest.h>

namespace headway::api {
namespace {

TEST(NotebookCookies, AreFoundAndLeftOutByName) {
  const std::string header = "_xsrf=2|abc; headway-notebook=hwu_secret; username-x=\"y\"";
  EXPECT_EQ(CookieValue(header, kNotebookCookie), "hwu_secret");
  EXPECT_EQ(CookieValue(header, "_xsrf"), "2|abc");
  EXPECT_EQ(CookieValue(header, "missing"), "");
  EXPECT_EQ(CookieValue("headway-notebook-2=x", kNotebookCookie), "");
  EXPECT_EQ(CookieHeaderWithout(header, kNotebookCookie), "_xsrf=2|abc; username-x=\"y\"");
  EXPECT_EQ(CookieHeaderWithout("headway-notebook=a", kNotebookCookie), "");
  EXPECT_EQ(CookieHeaderWithout("", kNotebookCookie), "");
}

TEST(NotebookPaths, NameTheNotebook) {
  EXPECT_EQ(NotebookOfPath("/notebooks/lab/api/kernels"), "lab");
  EXPECT_EQ(NotebookOfPath("/notebooks/lab"), "lab");
  EXPECT_EQ(NotebookOfPath("/notebooks/../etc/passwd"), "");
  EXPECT_EQ(NotebookOfPath("/notebooks/"), "");
  EXPECT_EQ(NotebookOfPath("/api/v1/notebooks/lab"), "");
}

TEST(NotebookLogins, ACodeWorksOnceForItsNotebookForAMinute) {
  ManualClock clock(FromUnixMillis(1796400000000));
  NotebookLogins logins(clock);
  std::string code = logins.Issue("lab", "session-secret");
  EXPECT_FALSE(logins.Redeem("other", code).ok()) << "another notebook's code";
  auto secret = logins.Redeem("lab", code);
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(*secret, "session-secret");
  EXPECT_FALSE(logins.Redeem("lab", code).ok()) << "used";
  std::string late = logins.Issue("lab", "s2");
  clock.Advance(std::chrono::seconds(61));
  EXPECT_FALSE(logins.Redeem("lab", late).ok()) << "expired";
  EXPECT_FALSE(logins.Redeem("lab", "").ok());
}

}  // namespace
}  // namespace headway::api
