// Jobs in OCI images on the real server: a real registry on loopback
// (Debian's docker-registry) holding a small image built here with buildah
// from a static busybox, pulled by skopeo, unpacked by umoci and run by crun
// inside the job's sandbox (exec/oci/, exec/local/container.h). Needs root,
// as the CI machine runs the suites.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "test_server.h"
#include "workflow_test_support.h"

namespace headway::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Base64(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -6;
  for (unsigned char c : in) {
    val = (val << 8) + c;
    bits += 8;
    while (bits >= 0) {
      out.push_back(kAlphabet[(val >> bits) & 0x3F]);
      bits -= 6;
    }
  }
  if (bits > -6) out.push_back(kAlphabet[((val << 8) >> (bits + 8)) & 0x3F]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

// A docker-registry on a free loopback port, optionally behind htpasswd
// (user "alice", password "s3cret-pass"), removed with its files.
class Registry {
 public:
  explicit Registry(bool with_password) : dir_(MakeTempDir("headway-registry")) {
    port_ = UnusedLoopbackPort();
    std::string config =
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        "    rootdirectory: " +
        dir_ + "/data\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port_) + "\n";
    if (with_password) {
      CommandResult hash =
          RunCommand({"/usr/bin/python3", "-c",
                      "import bcrypt,sys; sys.stdout.write('alice:' + "
                      "bcrypt.hashpw(b's3cret-pass', bcrypt.gensalt(rounds=5)).decode())"});
      EXPECT_EQ(hash.exit_code, 0) << hash.err;
      WriteFile(dir_ + "/htpasswd", hash.out + "\n");
      config += "auth:\n  htpasswd:\n    realm: test\n    path: " + dir_ + "/htpasswd\n";
    }
    WriteFile(dir_ + "/config.yml", config);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = dir_ + "/registry.log";
      std::freopen(log.c_str(), "w", stdout);
      std::freopen(log.c_str(), "a", stderr);
      ::execl("/usr/bin/docker-registry", "docker-registry", "serve",
              (dir_ + "/config.yml").c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ready_ = WaitFor([&] {
      return RunCommand({"/usr/bin/curl", "-s", "-o", "/dev/null", "http://" + host() + "/v2/"})
                 .exit_code == 0;
    });
  }
  ~Registry() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  bool ready() const { return ready_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& dir() const { return dir_; }

  // Builds a busybox image holding /bin/special-tool (which the host lacks)
  // and pushes it as REPOSITORY:1; returns the reference.
  std::string PushToolsImage(const std::string& repository, const std::string& filler = "") const {
    const std::string reference = host() + "/" + repository + ":1";
    std::string script =
        "set -e\n"
        "c=$(buildah from scratch)\n"
        "trap 'buildah rm $c >/dev/null' EXIT\n"
        "m=$(buildah mount $c)\n"
        "mkdir -p $m/bin $m/tmp $m/etc $m/mnt\n"
        "cp /bin/busybox $m/bin/busybox\n"
        "for a in sh ls cat echo id mkdir wget env; do ln -s busybox $m/bin/$a; done\n"
        "printf '#!/bin/sh\\necho special-tool ran with \"$@\"\\n' > $m/bin/special-tool\n"
        "chmod 755 $m/bin/special-tool\n";
    if (!filler.empty()) script += "head -c " + filler + " /dev/urandom > $m/filler\n";
    script +=
        "buildah config --env PATH=/bin --env FROM_IMAGE=yes --workingdir /mnt "
        "--entrypoint '[\"/bin/special-tool\"]' --cmd default-arg $c\n"
        "buildah commit -q $c " +
        repository +
        "-build >/dev/null\n"
        "buildah push -q --tls-verify=false --creds alice:s3cret-pass " +
        repository + "-build docker://" + reference +
        "\n"
        "buildah rmi " +
        repository + "-build >/dev/null\n";
    CommandResult built = RunCommand({"/bin/sh", "-c", script});
    EXPECT_EQ(built.exit_code, 0) << built.out << built.err;
    return reference;
  }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  bool ready_ = false;
};

// A Docker config.json granting `password` for the registry at `host`, 0600.
std::string AuthFile(const std::string& dir, const std::string& host, const std::string& password) {
  const std::string path = dir + "/auth-" + password + ".json";
  WriteFile(path, "{\"auths\": {\"" + host + "\": {\"auth\": \"" + Base64("alice:" + password) +
                      "\"}}}\n");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  return path;
}

std::string Log(const TestServer& server, const std::string& job) {
  return server.Cli({"logs", job}).out;
}

TEST(Images, AJobRunsInItsImageWithToolsTheHostLacksAsItsAccountAndCannotReachTheServersFiles) {
  ASSERT_FALSE(fs::exists("/bin/special-tool"));
  Registry registry(/*with_password=*/false);
  ASSERT_TRUE(registry.ready());
  const std::string image = registry.PushToolsImage("tools");
  TestServer server(/*gpus=*/2, {"--insecure-registry", registry.host()});
  const std::string data = server.data_dir();

  // A job of team b keeps a checkpoint the job in the image must not read.
  server.Submit(
      "name: victim\nteam: b\ncommand: \"echo b-weights > "
      "$HEADWAY_CHECKPOINT_DIR/model.pt\"\n");
  ASSERT_TRUE(server.WaitForState("victim", "Succeeded")) << server.ServerLog();

  server.Submit(
      "name: boxed\nteam: a\nimage: " + image +
      "\n"
      "command:\n  - /bin/sh\n  - -c\n  - |\n"
      "    special-tool hello\n"
      "    echo \"uid $(id -u) cwd $(pwd) path $PATH from-image $FROM_IMAGE\"\n"
      "    mkdir -p /mnt/out && echo result > /mnt/out/x && echo \"wrote $(cat /mnt/out/x)\"\n"
      "    echo ckpt > $HEADWAY_CHECKPOINT_DIR/own && echo own-checkpoint-ok\n"
      "    cat " +
      data +
      "/admin-token >/dev/null 2>&1 && echo READ-ADMIN-TOKEN\n"
      "    cat " +
      data +
      "/headway.db >/dev/null 2>&1 && echo READ-DATABASE\n"
      "    cat " +
      data +
      "/jobs/victim/checkpoints/model.pt 2>/dev/null && echo READ-VICTIM\n"
      "    ls /usr/bin/python3 >/dev/null 2>&1 && echo SEES-HOST-ROOT\n"
      "    wget -q -O- $HEADWAY_URL/healthz && echo\n");
  ASSERT_TRUE(server.WaitForState("boxed", "Succeeded"))
      << server.ServerLog() << Log(server, "boxed");
  const std::string log = Log(server, "boxed");
  EXPECT_THAT(log, HasSubstr("special-tool ran with hello"));
  // As the team's account, in the image's working directory and PATH.
  EXPECT_THAT(log, HasSubstr("uid 65534 cwd /mnt path /bin from-image yes"));
  EXPECT_THAT(log, HasSubstr("wrote result"));
  EXPECT_THAT(log, HasSubstr("own-checkpoint-ok"));
  EXPECT_THAT(log, HasSubstr("\"status\":\"ok\""));  // the API through the job's network
  for (const char* leak : {"READ-ADMIN-TOKEN", "READ-DATABASE", "READ-VICTIM", "SEES-HOST-ROOT"}) {
    EXPECT_THAT(log, Not(HasSubstr(leak)));
  }
  // What it wrote in its root stays with the attempt, not in the cached image.
  EXPECT_TRUE(fs::exists(data + "/jobs/boxed/attempt-0/image/upper/mnt/out/x"));
  EXPECT_TRUE(fs::exists(data + "/jobs/boxed/checkpoints/own"));
  // Each pull is an event with its size and time; the second job uses the cache.
  EXPECT_TRUE(server.HasEvent("boxed", "Launched", "in image " + image)) << server.ServerLog();
  EXPECT_TRUE(server.HasEvent("boxed", "Launched", " MB in ")) << server.ServerLog();

  // No command: the image's entrypoint and cmd, as Kubernetes runs them;
  // args alone replace the cmd.
  server.Submit("name: entry\nteam: a\nimage: " + image + "\nimagePullPolicy: IfNotPresent\n");
  server.Submit("name: entry-args\nteam: a\nimage: " + image + "\nargs: [given, args]\n");
  ASSERT_TRUE(server.WaitForState("entry", "Succeeded")) << server.ServerLog();
  ASSERT_TRUE(server.WaitForState("entry-args", "Succeeded")) << server.ServerLog();
  EXPECT_THAT(Log(server, "entry"), HasSubstr("special-tool ran with default-arg"));
  EXPECT_THAT(Log(server, "entry-args"), HasSubstr("special-tool ran with given args"));
  EXPECT_TRUE(server.HasEvent("entry", "Launched", "cached"));

  // Never: only what the machine has; a missing image is a clear failure.
  server.Submit("name: never\nimage: " + registry.host() +
                "/absent:1\nimagePullPolicy: Never\n"
                "command: [/bin/true]\n");
  ASSERT_TRUE(server.WaitForState("never", "Failed"));
  EXPECT_THAT(server.Job("never").dump(),
              HasSubstr("not on this machine and its imagePullPolicy is Never"));
  server.Submit("name: missing\nimage: " + registry.host() + "/absent:1\ncommand: [/bin/true]\n");
  ASSERT_TRUE(server.WaitForState("missing", "Failed"));
  EXPECT_THAT(server.Job("missing").dump(), HasSubstr("has no such image"));

  // `headway exec` runs in the container: its root, its PATH, its account.
  server.Submit(
      "name: waiter\nteam: a\nimage: " + image +
      "\ncommand: [/bin/sh, -c, "
      "\"echo waiting; while [ ! -e /mnt/released ]; do sleep 0.1; done; echo released\"]\n");
  ASSERT_TRUE(server.WaitForState("waiter", "Running"));
  ASSERT_TRUE(WaitFor([&] { return Log(server, "waiter").find("waiting") != std::string::npos; }));
  CommandResult exec = server.Cli({"exec", "waiter", "--", "/bin/sh", "-c",
                                   "special-tool via-exec; id -u; touch /mnt/released"});
  EXPECT_EQ(exec.exit_code, 0) << exec.out << exec.err;
  EXPECT_THAT(exec.out, HasSubstr("special-tool ran with via-exec\n65534"));
  ASSERT_TRUE(server.WaitForState("waiter", "Succeeded")) << Log(server, "waiter");
  EXPECT_THAT(Log(server, "waiter"), HasSubstr("released"));

  // A bad reference is refused at submit, naming the field.
  CommandResult refused = server.Cli({"submit", "-f", "-"},
                                     "name: bad\nimage: \"Not/An:Image\"\n"
                                     "command: [/bin/true]\n");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("image"));
}

TEST(Images, APrivateRegistryNeedsTheTeamsCredentialsAndAWrongPasswordSaysSo) {
  Registry registry(/*with_password=*/true);
  ASSERT_TRUE(registry.ready());
  const std::string image = registry.PushToolsImage("private");
  const std::string good = AuthFile(registry.dir(), registry.host(), "s3cret-pass");
  const std::string bad = AuthFile(registry.dir(), registry.host(), "wrong-pass");
  TestServer server(/*gpus=*/0, {"--insecure-registry", registry.host(), "--registry-auth",
                                 "vision=" + good, "--registry-auth", "nlp=" + bad});

  server.Submit("name: with-creds\nteam: vision\nimage: " + image + "\nargs: [pulled]\n");
  server.Submit("name: wrong-pass\nteam: nlp\nimage: " + image + "\nargs: [pulled]\n");
  server.Submit("name: anonymous\nteam: other\nimage: " + image + "\nargs: [pulled]\n");
  ASSERT_TRUE(server.WaitForState("with-creds", "Succeeded")) << server.ServerLog();
  EXPECT_THAT(Log(server, "with-creds"), HasSubstr("special-tool ran with pulled"));
  ASSERT_TRUE(server.WaitForState("wrong-pass", "Failed"));
  const std::string wrong = server.Job("wrong-pass").dump();
  EXPECT_THAT(wrong, HasSubstr("refused team 'nlp''s credentials"));
  EXPECT_THAT(wrong, HasSubstr("authentication required"));
  EXPECT_THAT(wrong, Not(HasSubstr("wrong-pass\\\"")));
  ASSERT_TRUE(server.WaitForState("anonymous", "Failed"));
  EXPECT_THAT(server.Job("anonymous").dump(), HasSubstr("refused an anonymous pull"));

  // A credentials file others can read is refused at start.
  fs::permissions(bad, fs::perms::others_read, fs::perm_options::add);
  CommandResult start =
      RunCommand({HeadwayBinary(), "server", "--data-dir", server.base_dir() + "/other-data",
                  "--listen", "127.0.0.1:0", "--registry-auth", "nlp=" + bad});
  EXPECT_NE(start.exit_code, 0);
  EXPECT_THAT(start.out + start.err, HasSubstr("chmod 600"));
}

TEST(Images, TheCacheKeepsWithinItsBoundEvictingTheLeastRecentlyUsedImageNoJobRuns) {
  Registry registry(/*with_password=*/false);
  ASSERT_TRUE(registry.ready());
  // Three images of about 5.4 MB each (a busybox and 1 MB of random bytes,
  // unpacked 3.3 MB, as pulled 2.1 MB) in a 12 MiB cache: two fit, a third
  // evicts one.
  const std::string first = registry.PushToolsImage("first", "1000000");
  const std::string second = registry.PushToolsImage("second", "1000000");
  const std::string third = registry.PushToolsImage("third", "1000000");
  TestServer server(/*gpus=*/0, {"--insecure-registry", registry.host(), "--image-cache", "12Mi"});
  const std::string roots = server.data_dir() + "/images/roots";
  auto cached = [&] {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(roots)) n += entry.is_directory() ? 1 : 0;
    return n;
  };
  const std::string release = server.work_dir() + "/release";
  // The first image stays in use while the others come and go.
  server.Submit("name: holder\nimage: " + first +
                "\ncommand: [/bin/sh, -c, \"echo held; while [ ! "
                "-e /mnt/out ]; do sleep 0.1; done\"]\n");
  ASSERT_TRUE(WaitFor([&] { return Log(server, "holder").find("held") != std::string::npos; }))
      << server.ServerLog();
  server.Submit("name: b\nimage: " + second + "\nargs: [b]\n");
  ASSERT_TRUE(server.WaitForState("b", "Succeeded")) << server.ServerLog();
  EXPECT_EQ(cached(), 2);
  server.Submit("name: c\nimage: " + third + "\nargs: [c]\n");
  ASSERT_TRUE(server.WaitForState("c", "Succeeded")) << server.ServerLog();
  // The second (least recently used and idle) went; the first is in use.
  EXPECT_TRUE(server.HasEvent("c", "Launched", "1 older image(s) evicted from the cache"));
  EXPECT_EQ(cached(), 2);
  server.Submit("name: b-again\nimage: " + second + "\nargs: [again]\n");
  ASSERT_TRUE(server.WaitForState("b-again", "Succeeded")) << server.ServerLog();
  EXPECT_TRUE(server.HasEvent("b-again", "Launched", " MB in "));  // pulled again
  CommandResult released = server.Cli({"exec", "holder", "--", "/bin/mkdir", "/mnt/out"});
  EXPECT_EQ(released.exit_code, 0) << released.err;
  ASSERT_TRUE(server.WaitForState("holder", "Succeeded"));
}

TEST(Images, WorkflowStepsRunInTheirImagesAndTheirOutputsAreCollectedFromThere) {
  Registry registry(/*with_password=*/false);
  ASSERT_TRUE(registry.ready());
  const std::string image = registry.PushToolsImage("steps");
  TestServer server(/*gpus=*/0,
                    {"--insecure-registry", registry.host(), "--workflow-images", "run"});
  // Writes where a container may and a host process may not (/mnt/out,
  // /outputs), as Argo examples do; the next step reads the artifact back.
  CommandResult r = server.Cli({"workflow", "submit", "-", "--wait"}, R"y(
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: boxed-steps}
spec:
  entrypoint: main
  templates:
  - name: main
    steps:
    - - {name: produce, template: produce}
    - - name: consume
        template: consume
        arguments:
          artifacts: [{name: model, from: "{{steps.produce.outputs.artifacts.model}}"}]
  - name: produce
    outputs:
      parameters: [{name: x, valueFrom: {path: /mnt/out/x}}]
      artifacts: [{name: model, path: /outputs/model}]
    container:
      image: )y" + image + R"y(
      imagePullPolicy: IfNotPresent
      command: [/bin/sh, -c, "mkdir -p /mnt/out /outputs/model && special-tool made > /mnt/out/x && echo w1 > /outputs/model/weights"]
  - name: consume
    inputs:
      artifacts: [{name: model, path: /in/model}]
    script:
      image: )y" + image + R"y(
      command: [/bin/sh]
      source: |
        cat /in/model/weights
        special-tool consumed
)y");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << server.ServerLog();
  json wf = Workflow(server, "boxed-steps");
  EXPECT_EQ(NodeOf(wf, "produce")["outputs"]["parameters"][0]["value"],
            "special-tool ran with made")
      << wf.dump(2);
  EXPECT_EQ(NodeOf(wf, "consume")["outputs"]["result"], "w1\nspecial-tool ran with consumed")
      << wf.dump(2);
  // Each step's job ran in the image (its Launched event says so).
  for (const char* step : {"produce", "consume"}) {
    const std::string job = NodeOf(wf, step)["headway"]["job"].get<std::string>();
    EXPECT_TRUE(server.HasEvent(job, "Launched", "in image " + image)) << job;
  }
}

}  // namespace
}  // namespace headway::testing
