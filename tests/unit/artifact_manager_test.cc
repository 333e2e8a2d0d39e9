// The artifact manager over a real SQLite store and a real local object
// store, with a ManualClock: the sweep of objects no version holds.
#include "server/artifact_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "artifact/file_digest.h"
#include "artifact/local/local_object_store.h"
#include "store/store.h"

namespace headway {
namespace {

namespace fs = std::filesystem;

class ArtifactManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/headway-artifacts-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    auto store = OpenSqliteStore(dir_ + "/headway.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
    auto objects = OpenLocalObjectStore(dir_ + "/artifacts");
    ASSERT_TRUE(objects.ok()) << objects.status().ToString();
    objects_ = std::move(*objects);
    manager_ = std::make_unique<ArtifactManager>(*store_, *objects_, clock_);
  }
  void TearDown() override {
    manager_.reset();
    objects_.reset();
    store_.reset();
    fs::remove_all(dir_);
  }

  // Stores `content` as a new version of `name` (through the server, as
  // with the local store); returns the version.
  Artifact Put(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/upload-" + std::to_string(uploads_++);
    std::ofstream(path, std::ios::binary) << content;
    auto digest = DigestFile(path);
    EXPECT_TRUE(digest.ok());
    Artifact draft;
    draft.name = name;
    draft.team = "vision";
    draft.kind = ArtifactKind::kModel;
    draft.size = digest->size;
    draft.digest = digest->digest;
    auto created = manager_->Create(draft, /*client_multipart=*/false);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created->upload_through_server) return created->artifact;
    auto stored = manager_->Receive(name, created->artifact.version, path);
    EXPECT_TRUE(stored.ok()) << stored.status().ToString();
    return *stored;
  }

  // Writes an object under `key` as a failure between storing and recording would leave it.
  void LeaveObject(const std::string& key) {
    const std::string path = dir_ + "/left-" + std::to_string(uploads_++);
    std::ofstream(path) << key;
    ASSERT_TRUE(objects_->PutFile(key, path).ok());
  }

  bool Exists(const std::string& key) { return fs::exists(dir_ + "/artifacts/" + key); }

  std::string dir_;
  int uploads_ = 0;
  ManualClock clock_{SystemClock().Now()};
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ArtifactManager> manager_;
};

TEST_F(ArtifactManagerTest, TheSweepRemovesOnlyOldObjectsNoVersionHolds) {
  const Artifact kept = Put("resnet", "weights");
  const std::string orphan = "vision/sha256/ab/ab" + std::string(62, '1');
  const std::string other_team = "nlp/" + ContentKey(kept.digest);  // same bytes, no nlp version
  const std::string foreign = "datasets/imagenet/train-0001.tar";   // not a key Headway makes
  LeaveObject(orphan);
  LeaveObject(other_team);
  LeaveObject(foreign);

  // Young objects may be an upload whose record is on its way: kept.
  EXPECT_EQ(manager_->SweepOrphans(std::chrono::hours(24)), 0u);
  EXPECT_TRUE(Exists(orphan));

  clock_.Advance(std::chrono::hours(25));
  EXPECT_EQ(manager_->SweepOrphans(std::chrono::hours(24)), 2u);
  EXPECT_FALSE(Exists(orphan));
  EXPECT_FALSE(Exists(other_team));
  EXPECT_TRUE(Exists(ObjectKey(kept))) << "a version holds it";
  EXPECT_TRUE(Exists(foreign)) << "not a key the server makes";
  auto got = manager_->Open("resnet", std::nullopt, std::nullopt);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(fs::exists(*got->local_path));
}

// S3 servers give an object's time to the second, and Swift rounds it up:
// an object written just now may read as a little in the future. With no
// minimum age it is swept all the same.
TEST_F(ArtifactManagerTest, AtAgeZeroTheSweepTakesAnObjectThatReadsAsWrittenJustAfterNow) {
  const std::string orphan = "vision/sha256/ab/ab" + std::string(62, '3');
  LeaveObject(orphan);  // its time is the machine's now, a little after the clock's
  EXPECT_EQ(manager_->SweepOrphans(std::chrono::seconds(0)), 1u);
  EXPECT_FALSE(Exists(orphan));
}

TEST_F(ArtifactManagerTest, APendingVersionKeepsItsBytesFromTheSweep) {
  Artifact draft;
  draft.name = "ckpt";
  draft.team = "vision";
  draft.kind = ArtifactKind::kCheckpoint;
  draft.size = 3;
  draft.digest = "sha256:" + std::string(64, 'c');
  ASSERT_TRUE(manager_->Create(draft, false).ok());
  const std::string key = "vision/" + ContentKey(draft.digest);
  LeaveObject(key);
  clock_.Advance(std::chrono::hours(25));
  EXPECT_EQ(manager_->SweepOrphans(std::chrono::hours(24)), 0u);
  EXPECT_TRUE(Exists(key));
}

// A draft declaring 2^64 - held bytes once made the team's sum wrap back
// under its quota, so that real uploads beside it went through.
TEST_F(ArtifactManagerTest, ADraftSizedToWrapTheTeamsSumIsRefusedAndTheQuotaHolds) {
  ArtifactManagerOptions options;
  options.quota_bytes["vision"] = 1024;
  manager_ = std::make_unique<ArtifactManager>(*store_, *objects_, clock_, options);
  Put("held", std::string(1000, 'x'));
  Artifact draft;
  draft.name = "wrap";
  draft.team = "vision";
  draft.kind = ArtifactKind::kOutput;
  draft.digest = "sha256:" + std::string(64, 'd');
  draft.size = std::numeric_limits<std::uint64_t>::max() - 999;
  auto created = manager_->Create(draft, false);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().field(), "size");
  // Within the declared bound but over the quota: refused, not wrapped.
  draft.size = kMaxArtifactBytes;
  created = manager_->Create(draft, false);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kPermissionDenied) << created.status().ToString();
  draft.size = 25;
  EXPECT_FALSE(manager_->Create(draft, false).ok()) << "1000 + 25 is over 1024";
  draft.size = 24;
  EXPECT_TRUE(manager_->Create(draft, false).ok());
}

TEST(ObjectKeys, ParseBackWhatObjectKeyMakesAndNothingElse) {
  Artifact a;
  a.team = "vision";
  a.digest = "sha256:" + std::string(64, 'e');
  auto parts = ParseObjectKey(ObjectKey(a));
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->team, "vision");
  EXPECT_EQ(parts->digest, a.digest);
  for (const std::string& bad :
       {std::string("vision/sha256/ee/") + std::string(63, 'e'),
        "vision/sha256/ab/" + std::string(64, 'e'), "a/b/sha256/ee/" + std::string(64, 'e'),
        "/sha256/ee/" + std::string(64, 'e'), "vision/md5/ee/" + std::string(64, 'e'),
        "vision/sha256/EE/" + std::string(64, 'E'), std::string("plain-file")}) {
    EXPECT_FALSE(ParseObjectKey(bad)) << bad;
  }
}

}  // namespace
}  // namespace headway
