#include <gtest/gtest.h>

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

}  // namespace
}  // namespace headway
