#include "core/time.h"

#include <gtest/gtest.h>

namespace headway {
namespace {

TEST(Time, Rfc3339RoundTrips) {
  Time t = FromUnixMillis(1796205600123);
  EXPECT_EQ(FormatRfc3339(t), "2026-12-02T10:00:00.123Z");
  EXPECT_EQ(ParseRfc3339("2026-12-02T10:00:00.123Z"), t);
  EXPECT_EQ(ParseRfc3339("2026-12-02T11:00:00.123+01:00"), t);
  EXPECT_EQ(ParseRfc3339("2026-12-02T10:00:00Z"), FromUnixMillis(1796205600000));
}

TEST(Time, Rfc3339RejectsGarbage) {
  for (const char* bad :
       {"", "yesterday", "2026-12-02", "2026-13-02T10:00:00Z", "2026-12-02T10:00:00",
        "2026-12-02T10:00:00Zjunk", "2026-12-02T10:00:00."}) {
    EXPECT_FALSE(ParseRfc3339(bad).has_value()) << bad;
  }
}

TEST(Time, Durations) {
  EXPECT_EQ(ParseDuration("90"), std::chrono::seconds(90));
  EXPECT_EQ(ParseDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(ParseDuration("2d"), std::chrono::hours(48));
  for (const char* bad : {"", "h", "1x", "-5s", "1.5h", "99999999999999"}) {
    EXPECT_FALSE(ParseDuration(bad).has_value()) << bad;
  }
  EXPECT_EQ(FormatDuration(std::chrono::minutes(90)), "1h30m");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(std::chrono::hours(51)), "2d3h");
}

}  // namespace
}  // namespace headway
