#include "core/image_ref.h"

#include <gtest/gtest.h>

#include "core/job_spec_parser.h"

namespace headway {
namespace {

TEST(ImageRef, ReadsReferencesAsDockerDoes) {
  auto plain = ParseImageRef("busybox");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Canonical(), "docker.io/library/busybox:latest");
  EXPECT_TRUE(plain->Floating());

  auto local = ParseImageRef("127.0.0.1:5000/team/trainer:2.1");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->registry, "127.0.0.1:5000");
  EXPECT_EQ(local->repository, "team/trainer");
  EXPECT_EQ(local->tag, "2.1");
  EXPECT_FALSE(local->Floating());

  auto hub = ParseImageRef("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime");
  ASSERT_TRUE(hub.ok());
  EXPECT_EQ(hub->registry, "docker.io");
  EXPECT_EQ(hub->repository, "pytorch/pytorch");

  const std::string digest = "sha256:" + std::string(64, 'a');
  auto pinned = ParseImageRef("localhost/img@" + digest);
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->registry, "localhost");
  EXPECT_EQ(pinned->digest, digest);
  EXPECT_TRUE(pinned->tag.empty());
  EXPECT_FALSE(pinned->Floating());
}

TEST(ImageRef, RefusesMalformedReferencesWithTheReason) {
  for (const char* bad : {"", "Upper/Case", "name:", "a//b", "img@sha256:12", "-lead",
                          "img:bad/tag", "trailing-/x"}) {
    auto ref = ParseImageRef(bad);
    EXPECT_FALSE(ref.ok()) << bad;
    if (!ref.ok()) {
      EXPECT_NE(ref.status().message().find("not an image reference"), std::string::npos);
    }
  }
}

TEST(ImageRef, PullPolicyDefaultsAsKubernetesDoes) {
  EXPECT_EQ(EffectivePullPolicy(ImagePullPolicy::kDefault, *ParseImageRef("busybox")),
            ImagePullPolicy::kAlways);
  EXPECT_EQ(EffectivePullPolicy(ImagePullPolicy::kDefault, *ParseImageRef("busybox:1.36")),
            ImagePullPolicy::kIfNotPresent);
  EXPECT_EQ(EffectivePullPolicy(ImagePullPolicy::kNever, *ParseImageRef("busybox")),
            ImagePullPolicy::kNever);
  EXPECT_EQ(ParseImagePullPolicy("IfNotPresent"), ImagePullPolicy::kIfNotPresent);
  EXPECT_FALSE(ParseImagePullPolicy("ifnotpresent").has_value());
}

TEST(ImageRef, AJobSpecTakesAnImageAndItsPullPolicy) {
  auto spec = ParseJobSpec("name: a\nimage: registry.local:5000/t/img:1\nimagePullPolicy: Never\n");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->image, "registry.local:5000/t/img:1");
  EXPECT_EQ(spec->image_pull_policy, ImagePullPolicy::kNever);
  EXPECT_TRUE(spec->command.empty());  // the image's entrypoint runs

  auto no_command = ParseJobSpec("name: a\n");
  ASSERT_FALSE(no_command.ok());
  EXPECT_NE(no_command.status().ToString().find("command"), std::string::npos);

  auto bad_policy = ParseJobSpec("name: a\nimage: img:1\nimagePullPolicy: Sometimes\n");
  ASSERT_FALSE(bad_policy.ok());
  EXPECT_NE(bad_policy.status().ToString().find("Always, IfNotPresent or Never"),
            std::string::npos);

  auto policy_alone = ParseJobSpec("name: a\ncommand: [x]\nimagePullPolicy: Always\n");
  ASSERT_FALSE(policy_alone.ok());
  EXPECT_NE(policy_alone.status().ToString().find("names an image"), std::string::npos);

  auto bad_image = ParseJobSpec("name: a\nimage: \"Bad:Ref:\"\n");
  ASSERT_FALSE(bad_image.ok());
  EXPECT_NE(bad_image.status().ToString().find("image"), std::string::npos);
}

}  // namespace
}  // namespace headway
