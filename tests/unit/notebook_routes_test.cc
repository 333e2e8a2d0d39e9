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

TEST(NotebookOrigins, NameTheNotebookAndItsOriginAsTheBrowserReachedTheServer) {
  EXPECT_EQ(NotebookOfHost("lab.localhost", "localhost"), "lab");
  EXPECT_EQ(NotebookOfHost("lab.nb.example.com", "nb.example.com"), "lab");
  EXPECT_EQ(NotebookOfHost("localhost", "localhost"), "");
  EXPECT_EQ(NotebookOfHost("a.b.localhost", "localhost"), "");  // not a notebook name
  EXPECT_EQ(NotebookOfHost("labxlocalhost", "localhost"), "");
  EXPECT_EQ(NotebookOfHost("lab.localhost", ""), "");
  EXPECT_EQ(NotebookOrigin("lab", "localhost", "127.0.0.1:8080", false),
            "http://lab.localhost:8080");
  EXPECT_EQ(NotebookOrigin("lab", "nb.example.com", "gpu.example.com", true),
            "https://lab.nb.example.com");
  EXPECT_EQ(NotebookOrigin("lab", "localhost", "[::1]:9000", false), "http://lab.localhost:9000");
  EXPECT_EQ(NotebookOrigin("lab", "localhost", "::1", false), "http://lab.localhost");
}

// Jupyter's cookies stay the notebook's: its host (no Domain, which would
// reach the parent domain and every other notebook) and its path.
TEST(NotebookOrigins, AnUpstreamCookieIsConfinedToItsNotebook) {
  const std::string base = "/notebooks/lab/";
  EXPECT_EQ(ConfineSetCookie("_xsrf=2|ab; Path=/notebooks/lab/; SameSite=Lax", base),
            "_xsrf=2|ab; Path=/notebooks/lab/; SameSite=Lax");
  EXPECT_EQ(ConfineSetCookie("username-x=\"y\"; Domain=.localhost; Path=/; HttpOnly", base),
            "username-x=\"y\"; HttpOnly; Path=/notebooks/lab/");
  EXPECT_EQ(ConfineSetCookie("a=b", base), "a=b; Path=/notebooks/lab/");
  EXPECT_EQ(ConfineSetCookie("a=b; domain=example.com; path=/notebooks/lab/tree", base),
            "a=b; path=/notebooks/lab/tree");
  EXPECT_EQ(ConfineSetCookie("a=b; Path=/notebooks/other/", base), "a=b; Path=/notebooks/lab/");
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
