// A job's network on the real server: each local job has a network of its
// own. From it, a job reaches its own ranks and the control plane's API, and
// nothing else of the host: not a service on the host's loopback (another
// team's notebook or database), not the ports of other jobs. `headway exec`
// (and so `ssh -L`) runs in the job's network too. The host's network is an
// admin's to grant. Outbound access (public addresses only, through an
// egress proxy) is the site's to grant.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "test_server.h"

namespace headway::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A service on the host's loopback (team a's, or the host's own): it counts
// the connections it accepts.
class HostService {
 public:
  HostService() {
    fd_ = SilentListener(port_);
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0 || stopping_) break;
        ++accepted_;
        (void)!::write(c, "secret\n", 7);
        ::close(c);
      }
    });
  }
  ~HostService() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// A job script: tries the host's service, the control plane (a report with
// its own token), and its peer rank; writes what it reached.
std::string Probe(const std::string& report, int host_port) {
  return "import json, os, socket, time, urllib.request\n"
         "r = open('" +
         report +
         ".' + os.environ['RANK'], 'w')\n"
         "def reach(port, host='127.0.0.1'):\n"
         "    try:\n"
         "        s = socket.create_connection((host, port), timeout=3)\n"
         "        data = s.recv(16)\n"
         "        s.close()\n"
         "        return 'REACHED ' + data.decode().strip()\n"
         "    except OSError as e:\n"
         "        return 'REFUSED ' + type(e).__name__\n"
         "r.write('host-service ' + reach(" +
         std::to_string(host_port) +
         ") + '\\n')\n"
         "url = os.environ['HEADWAY_URL'] + '/api/v1/jobs/' + os.environ['HEADWAY_JOB'] + "
         "'/progress'\n"
         "req = urllib.request.Request(url, data=json.dumps({'step': 7}).encode(), method='POST',\n"
         "    headers={'Authorization': 'Bearer ' + os.environ['HEADWAY_TOKEN'],\n"
         "             'Content-Type': 'application/json'})\n"
         "try:\n"
         "    r.write('report %d\\n' % urllib.request.urlopen(req, timeout=10).status)\n"
         "except Exception as e:\n"
         "    r.write('report failed ' + repr(e) + '\\n')\n"
         "port = int(os.environ['MASTER_PORT'])\n"
         "if os.environ['RANK'] == '0':\n"
         "    l = socket.socket()\n"
         "    l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "    l.bind(('127.0.0.1', port))\n"
         "    l.listen(1)\n"
         "    l.settimeout(20)\n"
         "    c, _ = l.accept()\n"
         "    c.sendall(b'rank0\\n')\n"
         "    c.close()\n"
         "else:\n"
         "    for _ in range(200):\n"
         "        got = reach(port)\n"
         "        if got.startswith('REACHED'):\n"
         "            break\n"
         "        time.sleep(0.1)\n"
         "    r.write('peer ' + got + '\\n')\n"
         "r.close()\n";
}

TEST(Network, AJobReachesItsRanksAndTheApiButNothingElseOnTheHost) {
  HostService service;
  TestServer server;
  const std::string report = server.work_dir() + "/net";
  WriteFile(server.work_dir() + "/probe.py", Probe(report, service.port()));
  server.Submit(
      "name: probe\nteam: b\nresources: {processes_per_node: 2}\n"
      "command: [/usr/bin/python3, " +
      server.work_dir() + "/probe.py]\n");
  ASSERT_TRUE(server.WaitForState("probe", "Succeeded")) << server.Cli({"logs", "probe"}).out;
  const std::string rank0 = ReadFile(report + ".0"), rank1 = ReadFile(report + ".1");
  EXPECT_THAT(rank0, HasSubstr("host-service REFUSED")) << rank0;
  EXPECT_THAT(rank1, HasSubstr("host-service REFUSED")) << rank1;
  EXPECT_EQ(service.accepted(), 0);
  EXPECT_THAT(rank0, HasSubstr("report 202")) << rank0;
  EXPECT_THAT(rank1, HasSubstr("peer REACHED rank0")) << rank1;
  EXPECT_EQ(server.Job("probe")["progress"]["step"], 7);
}

TEST(Network, ExecRunsInTheJobsNetwork) {
  HostService service;
  TestServer server;
  // The job serves a port of its own; the host's service is on another.
  server.Submit(
      "name: serving\ncommand: [/usr/bin/python3, -c, \"import socket\\n"
      "l = socket.socket()\\nl.bind(('127.0.0.1', 18765))\\nl.listen(4)\\n"
      "while True:\\n    c, _ = l.accept()\\n    c.sendall(b'job\\\\n')\\n"
      "    c.close()\\n\"]\ntermination_grace: 1s\n");
  ASSERT_TRUE(server.WaitForState("serving", "Running"));
  const std::string connect =
      "import socket, sys\n"
      "try:\n"
      "    print('REACHED', socket.create_connection(('127.0.0.1', int(sys.argv[1])), "
      "timeout=3).recv(8).decode().strip())\n"
      "except OSError as e:\n"
      "    print('REFUSED', type(e).__name__)\n";
  CommandResult own;
  ASSERT_TRUE(WaitFor([&] {
    own = server.Cli({"exec", "serving", "--", "/usr/bin/python3", "-c", connect, "18765"});
    return own.out.find("REACHED job") != std::string::npos;
  })) << own.out
      << own.err;
  CommandResult host = server.Cli(
      {"exec", "serving", "--", "/usr/bin/python3", "-c", connect, std::to_string(service.port())});
  EXPECT_THAT(host.out, HasSubstr("REFUSED")) << host.out << host.err;
  EXPECT_EQ(service.accepted(), 0);
  server.Cli({"stop", "serving"});
}

// The relay connects from the attempt's own loopback address, so the
// per-client connection limit counts a job apart from the admin on 127.0.0.1:
// a job holding many idle connections does not lock the admin out.
TEST(Network, AJobsIdleConnectionsDoNotLockOthersOut) {
  TestServer server;
  const std::string opened = server.work_dir() + "/opened";
  WriteFile(server.work_dir() + "/hog.py",
            "import os, socket, time, urllib.parse\n"
            "u = urllib.parse.urlparse(os.environ['HEADWAY_URL'])\n"
            "held = []\n"
            "for _ in range(100):\n"
            "    try:\n"
            "        held.append(socket.create_connection((u.hostname, u.port), timeout=3))\n"
            "    except OSError:\n"
            "        break\n"
            "open('" +
                opened +
                "', 'w').write(str(len(held)))\n"
                "time.sleep(120)\n");
  server.Submit("name: hog\ncommand: [/usr/bin/python3, " + server.work_dir() +
                "/hog.py]\ntermination_grace: 1s\n");
  ASSERT_TRUE(WaitFor([&] { return !ReadFile(opened).empty(); }))
      << server.Cli({"logs", "hog"}).out;
  EXPECT_GE(std::stoi(ReadFile(opened)), 64) << "the job opened more than one client's share";
  // Its connections are open, idle, and the admin is still served.
  for (int i = 0; i < 5; ++i) {
    Answer jobs = Call(server, server.admin_token(), "GET", "/api/v1/jobs");
    EXPECT_EQ(jobs.status, 200) << jobs.raw;
  }
  server.Cli({"stop", "hog"});
}

TEST(Network, TheHostsNetworkIsAnAdminsToGrant) {
  HostService service;
  TestServer server;
  const std::string member = CreateToken(server, "bob", "b", "member");
  const std::string spec =
      "name: host-net\nteam: b\nhost_network: true\n"
      "command: [/usr/bin/python3, -c, \"import socket; "
      "socket.create_connection(('127.0.0.1', " +
      std::to_string(service.port()) + "), timeout=3).recv(8)\"]\n";
  CommandResult refused = RunCommand(
      {HEADWAY_BIN, "--server", server.url(), "--token", member, "submit", "-f", "-"}, spec);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("host_network: only an admin")) << refused.err;
  server.Submit(spec);  // the harness's token is the admin's
  ASSERT_TRUE(server.WaitForState("host-net", "Succeeded")) << server.Cli({"logs", "host-net"}).out;
  EXPECT_EQ(service.accepted(), 1);
}

// A job on the host's network names the port the server pulls its progress
// from (or its notebook serves on): the server connects only to a port a
// process of the job listens on, never to another service's on the host.
TEST(Network, OnTheHostsNetworkTheServerReachesOnlyPortsTheJobListensOn) {
  HostService service;
  TestServer server;
  const int own = UnusedLoopbackPort();
  WriteFile(server.work_dir() + "/serve.py",
            "import http.server, json, sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def log_message(self, *a): pass\n"
            "    def do_GET(self):\n"
            "        body = json.dumps({'currentStep': 5, 'totalSteps': 10}).encode()\n"
            "        self.send_response(200)\n"
            "        self.send_header('Content-Type', 'application/json')\n"
            "        self.end_headers()\n"
            "        self.wfile.write(body)\n"
            "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n");
  server.Submit(
      "name: serves\nhost_network: true\ntermination_grace: 1s\n"
      "command: [/usr/bin/python3, " +
      server.work_dir() + "/serve.py, \"" + std::to_string(own) +
      "\"]\n"
      "progress_endpoint: {port: " +
      std::to_string(own) + ", interval: 1s}\n");
  server.Submit(
      "name: points-away\nhost_network: true\ncommand: \"sleep 60\"\n"
      "termination_grace: 1s\n"
      "progress_endpoint: {port: " +
      std::to_string(service.port()) + ", interval: 1s}\n");
  ASSERT_TRUE(WaitFor([&] { return server.Job("serves")["progress"]["step"] == 5; }))
      << server.Job("serves").dump();
  ASSERT_TRUE(WaitFor([&] {
    return server.HasEvent(
        "points-away", "Warning",
        "no process of the job listens on port " + std::to_string(service.port()));
  })) << nlohmann::json(server.Events("points-away")).dump();
  EXPECT_EQ(service.accepted(), 0);
  server.Cli({"stop", "serves"});
  server.Cli({"stop", "points-away"});
}

// The internet, as far as a test can have one: a network namespace of its
// own, reached from the host through a veth pair, on documentation addresses
// (198.51.100.0/24, RFC 5737: public, not private), with a web server in it
// that counts its visitors.
class Internet {
 public:
  static constexpr const char* kHostSide = "198.51.100.1";
  static constexpr const char* kServer = "198.51.100.2";

  Internet() {
    const std::string id = std::to_string(::getpid());
    name_ = "hw-inet-" + id;
    host_if_ = "hwo" + id;
    const std::string peer = "hwp" + id;
    ok_ = Ip({"netns", "add", name_}) &&
          Ip({"link", "add", host_if_, "type", "veth", "peer", "name", peer}) &&
          Ip({"link", "set", peer, "netns", name_}) &&
          Ip({"addr", "add", std::string(kHostSide) + "/24", "dev", host_if_}) &&
          Ip({"link", "set", host_if_, "up"}) &&
          Ip({"-n", name_, "addr", "add", std::string(kServer) + "/24", "dev", peer}) &&
          Ip({"-n", name_, "link", "set", peer, "up"}) &&
          Ip({"-n", name_, "link", "set", "lo", "up"});
    if (!ok_) return;
    // A socket made while this thread is in the namespace stays in it.
    const int here = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int there = ::open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = here >= 0 && there >= 0 && ::setns(there, CLONE_NEWNET) == 0;
    if (ok_) {
      fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in at{};
      at.sin_family = AF_INET;
      ::inet_pton(AF_INET, kServer, &at.sin_addr);
      ok_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0 && ::listen(fd_, 16) == 0;
      socklen_t len = sizeof at;
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&at), &len);
      port_ = ntohs(at.sin_port);
      ok_ = ::setns(here, CLONE_NEWNET) == 0 && ok_;
    }
    if (here >= 0) ::close(here);
    if (there >= 0) ::close(there);
    if (!ok_) return;
    thread_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0 || stopping_) break;
        ++visits_;
        std::string request;
        char chunk[1024];
        ssize_t n;
        while (request.find("\r\n\r\n") == std::string::npos &&
               (n = ::read(c, chunk, sizeof chunk)) > 0) {
          request.append(chunk, static_cast<std::size_t>(n));
        }
        const std::string body = "hello from the internet\n";
        const std::string reply =
            "HTTP/1.0 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        (void)!::write(c, reply.data(), reply.size());
        ::close(c);
      }
    });
  }
  ~Internet() {
    stopping_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
    Ip({"link", "del", host_if_});
    Ip({"netns", "del", name_});
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }
  int visits() const { return visits_; }

 private:
  static bool Ip(std::vector<std::string> args) {
    args.insert(args.begin(), "/sbin/ip");
    CommandResult r = RunCommand(args);
    if (r.exit_code != 0) ADD_FAILURE() << "ip failed: " << r.err;
    return r.exit_code == 0;
  }

  std::string name_, host_if_;
  bool ok_ = false;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> visits_{0};
  std::thread thread_;
};

// Tries a destination through the job's proxy (as pip or requests would:
// the proxy from the environment), by a tunnel (CONNECT) or a plain request,
// and one directly; prints one line per try.
constexpr const char* kOutboundProbe = R"(import http.client, os, socket, sys, urllib.request
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return 'GOT ' + r.read().decode().strip()
    except Exception as e:
        return 'REFUSED ' + str(e)
def tunnel(host, port):
    proxy = os.environ.get('HTTPS_PROXY', 'none')
    if proxy == 'none':
        return 'REFUSED no proxy'
    c = http.client.HTTPConnection('127.0.0.1', int(proxy.rsplit(':', 1)[1]), timeout=10)
    try:
        c.set_tunnel(host, port)
        c.request('GET', '/tunnelled')
        return 'GOT ' + c.getresponse().read().decode().strip()
    except Exception as e:
        return 'REFUSED ' + str(e)
def direct(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return 'GOT connected'
    except OSError as e:
        return 'REFUSED ' + type(e).__name__
internet, port, host_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
print('proxy', os.environ.get('HTTPS_PROXY', 'none'))
print('plain', fetch('http://%s:%d/plain' % (internet, port)))
print('tunnel', tunnel(internet, port))
print('direct', direct(internet, port))
print('loopback', tunnel('127.0.0.1', host_port))
print('by-name', tunnel('localhost', host_port))
print('host-itself', fetch('http://198.51.100.1:%d/' % host_port))
print('private', tunnel('10.255.255.1', 80))
print('metadata', fetch('http://169.254.169.254/latest/meta-data/'))
)";

TEST(Network, OutboundIsTheSitesToGrantAndReachesOnlyPublicAddresses) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "making a network namespace for the test's internet needs root";
  Internet internet;
  ASSERT_TRUE(internet.ok());
  HostService service;
  const std::string probe_args = std::string(", \"") + Internet::kServer + "\", \"" +
                                 std::to_string(internet.port()) + "\", \"" +
                                 std::to_string(service.port()) + "\"]\n";
  {
    // Without the site's word a job has no way out but the control plane.
    TestServer closed;
    WriteFile(closed.work_dir() + "/probe.py", kOutboundProbe);
    closed.Submit("name: closed\ncommand: [/usr/bin/python3, " + closed.work_dir() + "/probe.py" +
                  probe_args);
    ASSERT_TRUE(closed.WaitForState("closed", "Succeeded"));
    const std::string out = closed.Cli({"logs", "closed"}).out;
    EXPECT_THAT(out, HasSubstr("proxy none")) << out;
    EXPECT_THAT(out, HasSubstr("plain REFUSED")) << out;
    EXPECT_THAT(out, HasSubstr("direct REFUSED")) << out;
    EXPECT_EQ(internet.visits(), 0);
  }
  TestServer server(4, {"--job-outbound=public"});
  WriteFile(server.work_dir() + "/probe.py", kOutboundProbe);
  server.Submit("name: open\nteam: b\ncommand: [/usr/bin/python3, " + server.work_dir() +
                "/probe.py" + probe_args);
  ASSERT_TRUE(server.WaitForState("open", "Succeeded")) << server.Cli({"logs", "open"}).out;
  const std::string out = server.Cli({"logs", "open"}).out;
  EXPECT_THAT(out, HasSubstr("proxy http://127.0.0.1:3128")) << out;
  EXPECT_THAT(out, HasSubstr("plain GOT hello from the internet")) << out;
  EXPECT_THAT(out, HasSubstr("tunnel GOT hello from the internet")) << out;
  EXPECT_EQ(internet.visits(), 2);
  // Raw sockets still reach nothing: only the proxy leads out.
  EXPECT_THAT(out, HasSubstr("direct REFUSED")) << out;
  // Nothing of the host nor of the site, whatever it is called.
  EXPECT_THAT(out, HasSubstr("loopback REFUSED Tunnel connection failed: 403")) << out;
  EXPECT_THAT(out, HasSubstr("127.0.0.1 is the host's loopback")) << out;
  EXPECT_THAT(out, HasSubstr("by-name REFUSED Tunnel connection failed: 403")) << out;
  EXPECT_THAT(out, HasSubstr("host-itself REFUSED HTTP Error 403")) << out;
  EXPECT_THAT(out, HasSubstr("private REFUSED Tunnel connection failed: 403")) << out;
  EXPECT_THAT(out, HasSubstr("10.255.255.1 is a private address")) << out;
  EXPECT_THAT(out, HasSubstr("metadata REFUSED HTTP Error 403")) << out;
  EXPECT_EQ(service.accepted(), 0);
  // The control plane is still reached directly (NO_PROXY): reports land.
  server.Submit(
      "name: reports\nteam: b\ncommand: [/usr/bin/python3, -c, \"import json, os, "
      "urllib.request; urllib.request.urlopen(urllib.request.Request("
      "os.environ['HEADWAY_URL'] + '/api/v1/jobs/' + os.environ['HEADWAY_JOB'] + "
      "'/progress', data=json.dumps({'step': 3}).encode(), headers={'Authorization': "
      "'Bearer ' + os.environ['HEADWAY_TOKEN'], 'Content-Type': 'application/json'}), "
      "timeout=10)\"]\n");
  ASSERT_TRUE(server.WaitForState("reports", "Succeeded")) << server.Cli({"logs", "reports"}).out;
  EXPECT_EQ(server.Job("reports")["progress"]["step"], 3);
}

}  // namespace
}  // namespace headway::testing
