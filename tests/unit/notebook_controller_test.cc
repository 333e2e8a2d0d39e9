// The notebook loop driven tick by tick with a ManualClock over the real job
// controller (with the fake executor) and a real SQLite store. The
// notebook's Jupyter server is a stand-in on loopback that answers
// /api/kernels as Jupyter does, with the kernels the test sets (a fake: the
// real server is started by tests/integration/notebook_test.cc, where time
// cannot be moved by an hour).
#include "server/notebook_controller.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "job_controller_fixture.h"

namespace headway {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

const Time kNotebookT0 = FromUnixMillis(JobControllerFixture::kStartMillis);

// Answers every request with the kernel list it holds, as Jupyter's
// GET /api/kernels does ([{"execution_state", "last_activity"}]).
class KernelsStandIn {
 public:
  KernelsStandIn() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at);
    ::listen(fd_, 16);
    socklen_t len = sizeof at;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &len);
    port_ = ntohs(at.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0 || stopping_) break;
        std::string request;
        char chunk[2048];
        ssize_t n;
        while (request.find("\r\n\r\n") == std::string::npos &&
               (n = ::read(c, chunk, sizeof chunk)) > 0) {
          request.append(chunk, static_cast<std::size_t>(n));
        }
        std::string body;
        {
          std::lock_guard lock(mu_);
          body = kernels_;
        }
        const std::string reply =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        (void)!::write(c, reply.data(), reply.size());
        ::close(c);
      }
    });
  }
  ~KernelsStandIn() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // One kernel, `state` ("idle" or "busy"), last active at `at`.
  void Kernel(const std::string& state, Time at) {
    std::lock_guard lock(mu_);
    kernels_ = "[{\"id\": \"k1\", \"execution_state\": \"" + state + "\", \"last_activity\": \"" +
               FormatRfc3339(at) + "\"}]";
  }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::string kernels_ = "[]";
  std::thread thread_;
};

class NotebookControllerTest : public JobControllerFixture {
 protected:
  void SetUp() override {
    StartJobs(1);
    NotebookControllerOptions notebooks;
    NotebookProfile profile;
    profile.idle_timeout = std::chrono::hours(1);
    profile.cull_warning = minutes(10);
    notebooks.profiles = {profile};
    notebooks.data_dir = dir_;
    notebooks.check_interval = seconds(30);
    notebooks_ = std::make_unique<NotebookController>(*store_, *jobs_, clock_, notebooks);
  }
  void TearDown() override {
    notebooks_.reset();
    JobControllerFixture::TearDown();
  }

  // Starts notebook `name`; its server comes up on the stand-in's port.
  std::string Start(const std::string& name) {
    api::NotebookStartRequest request;
    request.name = name;
    auto started = notebooks_->Start(request, "user/test");
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (!started.ok()) return {};
    const std::string job = started->record.job;
    jobs_->Tick();
    // What the notebook's launcher leaves in its job's own directory.
    const auto dir = std::filesystem::path(dir_) / "jobs" / job / "checkpoints";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "notebook-server.json")
        << "{\"port\": " << kernels_.port() << ", \"base_url\": \"/notebooks/" << name << "/\"}";
    return job;
  }
  void Tick(Duration advance) {
    clock_.Advance(advance);
    notebooks_->Tick();
    jobs_->Tick();
  }
  api::NotebookView View(const std::string& name) {
    auto view = notebooks_->Get(name);
    EXPECT_TRUE(view.ok());
    return view.ok() ? *view : api::NotebookView{};
  }

  KernelsStandIn kernels_;
  std::unique_ptr<NotebookController> notebooks_;
};

TEST_F(NotebookControllerTest, AnIdleNotebookIsWarnedThenCulledAndItsHomeIsKept) {
  kernels_.Kernel("idle", kNotebookT0);
  const std::string job = Start("lab");
  Tick(seconds(30));
  EXPECT_EQ(EventsOf(job, "NotebookReady").size(), 1u);
  Tick(minutes(45));
  EXPECT_TRUE(EventsOf(job, "NotebookIdle").empty()) << "45 minutes idle: not yet warned";
  Tick(minutes(6));  // 51 minutes: within the warning of the hour
  auto warned = EventsOf(job, "NotebookIdle");
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_THAT(warned[0].message, HasSubstr("it will be culled at"));
  EXPECT_FALSE(Signalled(job));
  Tick(minutes(10));  // 61 minutes
  EXPECT_TRUE(Signalled(job));
  api::NotebookView view = View("lab");
  EXPECT_EQ(view.record.state, NotebookState::kCulled);
  EXPECT_THAT(view.record.message, HasSubstr("its home is kept"));
}

TEST_F(NotebookControllerTest, UseAfterTheWarningKeepsTheNotebook) {
  kernels_.Kernel("idle", kNotebookT0);
  const std::string job = Start("lab");
  Tick(seconds(30));
  Tick(minutes(51));
  ASSERT_EQ(EventsOf(job, "NotebookIdle").size(), 1u);
  // The owner runs a cell: the kernel's activity is new.
  kernels_.Kernel("idle", clock_.Now());
  for (int i = 0; i < 4; ++i) Tick(minutes(10));
  EXPECT_FALSE(Signalled(job));
  EXPECT_EQ(View("lab").record.state, NotebookState::kRunning);
}

TEST_F(NotebookControllerTest, ABusyKernelIsNeverIdle) {
  kernels_.Kernel("busy", kNotebookT0);  // one long cell, running for hours
  const std::string job = Start("lab");
  Tick(seconds(30));
  for (int i = 0; i < 18; ++i) Tick(minutes(10));
  EXPECT_TRUE(EventsOf(job, "NotebookIdle").empty());
  EXPECT_FALSE(Signalled(job));
}

}  // namespace
}  // namespace headway
