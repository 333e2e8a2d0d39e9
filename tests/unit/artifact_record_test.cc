#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

#include "core/artifact.h"

namespace headway {
namespace {

Artifact Valid() {
  Artifact a;
  a.name = "mnist-resnet18.v2";
  a.digest = "sha256:" + std::string(64, 'a');
  a.labels = {{"framework", "pytorch"}};
  a.metrics = {{"eval_loss", 0.41}};
  return a;
}

TEST(ArtifactRecord, NamesAreSafeAsPathsAndKeys) {
  for (const char* good : {"a", "model", "mnist-resnet18.v2", "ckpt_1", "a.b_c-d"}) {
    EXPECT_TRUE(IsValidArtifactName(good)) << good;
  }
  for (const char* bad : {"", "/abs", "a/b", "a/../b", ".hidden", "Upper", "a b", "-dash", "..",
                          "a..b", "x\n", "trail."}) {
    EXPECT_FALSE(IsValidArtifactName(bad)) << bad;
  }
  EXPECT_FALSE(IsValidArtifactName(std::string(201, 'a')));
}

TEST(ArtifactRecord, DigestsAndTheirContentKeys) {
  const std::string digest = "sha256:" + std::string(62, '0') + "ff";
  EXPECT_TRUE(IsValidDigest(digest));
  EXPECT_EQ(ContentKey(digest), "sha256/00/" + std::string(62, '0') + "ff");
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(63, 'a')));
  EXPECT_FALSE(IsValidDigest("sha256:" + std::string(64, 'A')));
  EXPECT_FALSE(IsValidDigest("md5:" + std::string(64, 'a')));
}

TEST(ArtifactRecord, ReferencesNameALatestOrANumberedVersion) {
  auto latest = ParseArtifactRef("mnist-model");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->name, "mnist-model");
  EXPECT_FALSE(latest->version);
  EXPECT_FALSE(ParseArtifactRef("model:latest")->version);
  EXPECT_EQ(ParseArtifactRef("model:7")->version, 7);
  for (const char* bad : {"model:0", "model:-1", "model:x", "model:", ":3", "Model:1"}) {
    EXPECT_FALSE(ParseArtifactRef(bad).ok()) << bad;
  }
}

TEST(ArtifactRecord, ANewRecordIsCheckedFieldByField) {
  EXPECT_TRUE(ValidateNewArtifact(Valid()).ok());
  Artifact a = Valid();
  a.name = "../etc";
  EXPECT_EQ(ValidateNewArtifact(a).field(), "name");
  a = Valid();
  a.digest = "sha256:xyz";
  EXPECT_EQ(ValidateNewArtifact(a).field(), "digest");
  a = Valid();
  a.labels = {{"bad key!", "v"}};
  EXPECT_EQ(ValidateNewArtifact(a).field(), "labels");
  a = Valid();
  a.labels = {{"k", std::string(300, 'v')}};
  EXPECT_EQ(ValidateNewArtifact(a).field(), "labels");
  a = Valid();
  a.producer.step = -1;
  EXPECT_EQ(ValidateNewArtifact(a).field(), "producer.step");
  a = Valid();
  for (int i = 0; i < 300; ++i) a.metrics["m" + std::to_string(i)] = i;
  EXPECT_EQ(ValidateNewArtifact(a).field(), "metrics");
  EXPECT_EQ(ParseArtifactKind("checkpoint"), ArtifactKind::kCheckpoint);
  EXPECT_FALSE(ParseArtifactKind("weights"));
}

Artifact Version(std::int64_t v, std::optional<double> loss,
                 ArtifactState state = ArtifactState::kReady) {
  Artifact a;
  a.name = "ckpt";
  a.version = v;
  a.state = state;
  if (loss) a.metrics["eval_loss"] = *loss;
  return a;
}

TEST(ArtifactRetention, KeepsTheNewestAndTheBestAndWhatRunningJobsRead) {
  std::vector<Artifact> versions = {Version(1, 0.9),
                                    Version(2, 0.3),
                                    Version(3, 0.8),
                                    Version(4, std::numeric_limits<double>::quiet_NaN()),
                                    Version(5, std::nullopt),
                                    Version(6, 0.6),
                                    Version(7, 0.1, ArtifactState::kPending)};
  RetentionPolicy latest;
  latest.keep_latest = 2;
  EXPECT_EQ(VersionsToRelease(versions, latest, {}), (std::vector<std::int64_t>{1, 2, 3, 4}));
  RetentionPolicy best;
  best.keep_best = 2;
  best.metric = "eval_loss";
  // NaN and missing values are the worst; a Pending version is never released.
  EXPECT_EQ(VersionsToRelease(versions, best, {}), (std::vector<std::int64_t>{1, 3, 4, 5}));
  best.minimize = false;
  EXPECT_EQ(VersionsToRelease(versions, best, {}), (std::vector<std::int64_t>{2, 4, 5, 6}));
  RetentionPolicy both;
  both.keep_latest = 1;
  both.keep_best = 1;
  both.metric = "eval_loss";
  EXPECT_EQ(VersionsToRelease(versions, both, {3}), (std::vector<std::int64_t>{1, 4, 5}));
  EXPECT_TRUE(VersionsToRelease(versions, RetentionPolicy{}, {}).empty());
}

TEST(ArtifactRetention, ComesFromLabelsCheckedWhenAVersionIsCreated) {
  auto none = RetentionFromLabels({{"fw", "jax"}});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto policy = RetentionFromLabels({{"headway.dev/keep-latest", "3"},
                                     {"headway.dev/keep-best", "1"},
                                     {"headway.dev/best-metric", "acc"},
                                     {"headway.dev/best-mode", "max"}});
  ASSERT_TRUE(policy.ok() && policy->has_value());
  EXPECT_EQ((*policy)->keep_latest, 3);
  EXPECT_FALSE((*policy)->minimize);
  Artifact a = Valid();
  a.labels = {{"headway.dev/keep-latest", "0"}};
  EXPECT_EQ(ValidateNewArtifact(a).field(), "labels");
  a.labels = {{"headway.dev/keep-best", "2"}};
  EXPECT_THAT(ValidateNewArtifact(a).message(), ::testing::HasSubstr("best-metric"));
  a.labels = {{"headway.dev/keep-latest", "2"}, {"headway.dev/best-mode", "median"}};
  EXPECT_EQ(ValidateNewArtifact(a).field(), "labels");
}

}  // namespace
}  // namespace headway
