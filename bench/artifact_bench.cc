// Artifact transfer benchmark: one file of --mib MiB moved up and down three
// ways, side by side, in one run:
//   (a) Headway with the S3 backend: `headway artifacts put/get`, the bytes
//       going straight to the bucket with a presigned PUT and a redirect to a
//       presigned GET;
//   (b) `aws s3 cp` up and down, against the same S3 server and bucket;
//   (c) Headway with its local store: the bytes go through the server.
// The S3 server is OpenStack Swift with s3api on loopback (tests/s3/swift_s3).
// For each it prints MiB/s per direction, the ratio (a)/(b), the CPU seconds
// per GB moved of the Headway server, of Swift (the proxy, and all of its
// servers) and of the client process, from /proc/PID/stat and wait4().
// Every download is compared with the uploaded file byte for byte. No
// assertions on times; the exit status is non-zero only if a transfer failed
// or its bytes differ.
//
//   build/bench/artifact_bench [--mib 512] [--runs 1] [--server path/to/headway]
//                              [--aws aws] [--keep]
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "../tests/s3/s3_server.h"
#include "loopback_server.h"

namespace {

namespace fs = std::filesystem;
using headway::bench::CpuSeconds;
using headway::bench::ReadAll;
using headway::bench::ServerProcess;
using headway::testing::S3TestServer;
using Clock = std::chrono::steady_clock;

struct Options {
  long mib = 512;
  int runs = 1;
  std::string server = HEADWAY_BIN;
  std::string aws = "aws";
  bool keep = false;
};

struct Ran {
  int status = -1;
  double wall = 0;
  double cpu = 0;  // the client's own user + system CPU (and its waited children)
};

// Runs argv with `env` added to this process's environment, output to `log`.
Ran Run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
        const std::string& log) {
  Ran r;
  auto start = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::string why = "cannot run " + argv[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(2, why.data(), why.size());
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  r.wall = std::chrono::duration<double>(Clock::now() - start).count();
  auto tv = [](timeval t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  r.cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// Processes whose command line mentions `needle` (Swift's servers all name a
// config file under the S3 server's own directory).
std::vector<pid_t> PidsMentioning(const std::string& needle, const std::string& also = "") {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::string cmd = ReadAll("/proc/" + std::string(e->d_name) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos &&
        (also.empty() || cmd.find(also) != std::string::npos)) {
      pids.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return pids;
}

double SumCpu(const std::vector<pid_t>& pids) {
  double total = 0;
  for (pid_t p : pids) total += CpuSeconds(p);
  return total;
}

bool SameBytes(const std::string& a, const std::string& b) {
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  if (!x || !y) return false;
  std::vector<char> bx(1 << 20), by(1 << 20);
  while (true) {
    x.read(bx.data(), static_cast<std::streamsize>(bx.size()));
    y.read(by.data(), static_cast<std::streamsize>(by.size()));
    if (x.gcount() != y.gcount()) return false;
    if (x.gcount() == 0) return x.eof() && y.eof();
    if (std::memcmp(bx.data(), by.data(), static_cast<std::size_t>(x.gcount())) != 0) return false;
  }
}

void WriteRandomFile(const std::string& path, long mib) {
  std::ofstream out(path, std::ios::binary);
  std::mt19937_64 rng(42);
  std::vector<std::uint64_t> block((1 << 20) / 8);
  for (long i = 0; i < mib; ++i) {
    for (auto& v : block) v = rng();
    out.write(reinterpret_cast<const char*>(block.data()), 1 << 20);
  }
}

// Makes run `run`'s file distinct (its first 8 bytes), so that no store can
// skip an upload because it already holds the same bytes.
void Stamp(const std::string& path, int run) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  std::uint64_t v = 0x6865616477617900ULL + static_cast<std::uint64_t>(run);
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

// One direction of one way of moving the bytes, over all runs.
struct Direction {
  std::vector<double> wall, client_cpu, headway_cpu, proxy_cpu, swift_cpu;
  bool failed = false;
};

struct Way {
  std::string name;
  Direction up, down;
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// What a server's or Swift's CPU counters read, to subtract around a transfer.
struct Meters {
  pid_t headway = -1;  // -1: none for this way
  std::vector<pid_t> proxy, swift;
  struct Reading {
    double headway = 0, proxy = 0, swift = 0;
  };
  Reading Read() const {
    return {headway > 0 ? CpuSeconds(headway) : 0, SumCpu(proxy), SumCpu(swift)};
  }
};

// Runs one transfer, records its wall time and CPU into `d`.
bool Measure(const char* what, Direction& d, const Meters& m, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, const std::string& log) {
  auto before = m.Read();
  Ran r = Run(argv, env, log);
  auto after = m.Read();
  if (r.status != 0) {
    std::fprintf(stderr, "%s failed (exit %d); see %s:\n%s\n", what, r.status, log.c_str(),
                 ReadAll(log).substr(0, 4000).c_str());
    d.failed = true;
    return false;
  }
  d.wall.push_back(r.wall);
  d.client_cpu.push_back(r.cpu);
  d.headway_cpu.push_back(after.headway - before.headway);
  d.proxy_cpu.push_back(after.proxy - before.proxy);
  d.swift_cpu.push_back(after.swift - before.swift);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--mib")
      opt.mib = std::stol(next());
    else if (a == "--runs")
      opt.runs = std::stoi(next());
    else if (a == "--server")
      opt.server = next();
    else if (a == "--aws")
      opt.aws = next();
    else if (a == "--keep")
      opt.keep = true;
    else {
      std::fprintf(stderr,
                   "usage: artifact_bench [--mib 512] [--runs 1] [--server path/to/headway] "
                   "[--aws aws] [--keep]\n");
      return 2;
    }
  }
  if (opt.mib <= 0 || opt.runs <= 0) {
    std::fprintf(stderr, "--mib and --runs must be positive\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);

  std::string work =
      (fs::temp_directory_path() / ("artifact-bench-" + std::to_string(getpid()))).string();
  fs::create_directories(work);
  // Removed on every way out, unless --keep.
  struct RemoveAfter {
    std::string dir;
    bool keep;
    ~RemoveAfter() {
      std::error_code ec;
      if (keep)
        std::printf("kept %s\n", dir.c_str());
      else
        fs::remove_all(dir, ec);
    }
  } remove_after{work, opt.keep};
  const std::string src = work + "/payload.bin", log = work + "/commands.log";
  auto t0 = Clock::now();
  WriteRandomFile(src, opt.mib);
  std::printf("payload: %ld MiB of random bytes (%.1f s to write), %d run(s) per way\n", opt.mib,
              std::chrono::duration<double>(Clock::now() - t0).count(), opt.runs);

  S3TestServer s3;
  if (!s3.ok()) {
    std::fprintf(stderr, "%s\n", s3.error().c_str());
    return 1;
  }
  std::printf("S3 server: OpenStack Swift + s3api at %s (%.1f s to start)\n", s3.endpoint().c_str(),
              s3.startup_seconds());
  const std::string bucket = "artifact-bench";
  const std::string aws_config = s3.dir() + "/aws-config";
  std::ofstream(aws_config) << "[default]\nregion = " << s3.region()
                            << "\ns3 =\n  signature_version = s3v4\n";
  const std::vector<std::string> aws_env = {
      "AWS_CONFIG_FILE=" + aws_config, "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
      "AWS_ACCESS_KEY_ID=" + s3.access_key(), "AWS_SECRET_ACCESS_KEY=" + s3.secret_key(),
      "AWS_EC2_METADATA_DISABLED=true"};
  auto aws = [&](std::vector<std::string> args) {
    std::vector<std::string> v = {opt.aws, "--endpoint-url", s3.endpoint()};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  if (Run(aws({"s3api", "create-bucket", "--bucket", bucket}), aws_env, log).status != 0) {
    std::fprintf(stderr, "create-bucket failed:\n%s\n", ReadAll(log).c_str());
    return 1;
  }

  Meters swift_meters;
  swift_meters.proxy = PidsMentioning(s3.dir(), "proxy");
  swift_meters.swift = PidsMentioning(s3.dir());
  // The launcher itself (python, waiting) mentions the directory too: it is
  // counted in "all of Swift", where it costs next to nothing.

  // (a) Headway, S3 backend. Its credentials come from its environment.
  setenv("AWS_ACCESS_KEY_ID", s3.access_key().c_str(), 1);
  setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key().c_str(), 1);
  ServerProcess hw_s3(opt.server, "artifact-bench-s3",
                      {"--artifact-store", "s3", "--s3-endpoint", s3.endpoint(), "--s3-bucket",
                       bucket, "--s3-region", s3.region()});
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  // (c) Headway, local store.
  ServerProcess hw_local(opt.server, "artifact-bench-local");
  if (hw_s3.port() == 0 || hw_local.port() == 0) return 1;

  auto cli = [&](const ServerProcess& s, std::vector<std::string> args) {
    std::vector<std::string> v = {opt.server, "--server",
                                  "http://127.0.0.1:" + std::to_string(s.port())};
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  const std::vector<std::string> cli_env = {"HEADWAY_DATA_DIR=" + work + "/cli",
                                            "XDG_CONFIG_HOME=" + work + "/cli-config"};

  Way a{"headway, S3 (presigned)", {}, {}}, b{"aws s3 cp", {}, {}},
      c{"headway, local store", {}, {}};
  Meters ma = swift_meters, mb = swift_meters, mc = swift_meters;
  ma.headway = hw_s3.pid();
  mc.headway = hw_local.pid();
  bool ok = true;
  auto check = [&](const char* what, const std::string& dest) {
    if (!SameBytes(src, dest)) {
      std::fprintf(stderr, "%s: downloaded bytes differ from the uploaded ones\n", what);
      ok = false;
    }
    fs::remove(dest);
  };
  for (int run = 0; run < opt.runs; ++run) {
    Stamp(src, run);
    const std::string dest = work + "/back.bin";
    // Interleaved, so that a burst of load from others on the machine does
    // not fall on one way only.
    if (Measure("headway put (S3)", a.up, ma,
                cli(hw_s3, {"artifacts", "put", src, "--name", "bench-s3", "--kind", "model"}),
                cli_env, log) &&
        Measure("headway get (S3)", a.down, ma, cli(hw_s3, {"artifacts", "get", "bench-s3", dest}),
                cli_env, log)) {
      check("headway, S3", dest);
    } else {
      ok = false;
    }
    const std::string key = "s3://" + bucket + "/aws/run-" + std::to_string(run) + ".bin";
    if (Measure("aws s3 cp up", b.up, mb, aws({"s3", "cp", "--only-show-errors", src, key}),
                aws_env, log) &&
        Measure("aws s3 cp down", b.down, mb, aws({"s3", "cp", "--only-show-errors", key, dest}),
                aws_env, log)) {
      check("aws s3 cp", dest);
    } else {
      ok = false;
    }
    if (Measure(
            "headway put (local)", c.up, mc,
            cli(hw_local, {"artifacts", "put", src, "--name", "bench-local", "--kind", "model"}),
            cli_env, log) &&
        Measure("headway get (local)", c.down, mc,
                cli(hw_local, {"artifacts", "get", "bench-local", dest}), cli_env, log)) {
      check("headway, local", dest);
    } else {
      ok = false;
    }
  }

  const double mib = static_cast<double>(opt.mib), gb = mib * 1048576.0 / 1e9;
  auto rate = [&](const Direction& d) { return d.wall.empty() ? 0.0 : mib / Median(d.wall); };
  auto per_gb = [&](const std::vector<double>& v) { return v.empty() ? 0.0 : Median(v) / gb; };
  std::printf(
      "\n%ld MiB per transfer, median of %d; CPU in seconds per GB moved (1 GB = 1e9 bytes)\n",
      opt.mib, opt.runs);
  std::printf("%-24s %-5s %9s %8s %12s %11s %11s %11s\n", "way", "dir", "MiB/s", "wall s",
              "headway CPU", "swift proxy", "swift all", "client CPU");
  for (const Way* w : {&a, &b, &c}) {
    for (auto [dir, d] :
         {std::pair<const char*, const Direction*>{"up", &w->up}, {"down", &w->down}}) {
      if (d->wall.empty()) {
        std::printf("%-24s %-5s %9s\n", w->name.c_str(), dir, "failed");
        continue;
      }
      char hw[32] = "-";
      if (w != &b) std::snprintf(hw, sizeof hw, "%.2f", per_gb(d->headway_cpu));
      std::printf("%-24s %-5s %9.1f %8.2f %12s %11.2f %11.2f %11.2f\n", w->name.c_str(), dir,
                  rate(*d), Median(d->wall), hw, per_gb(d->proxy_cpu), per_gb(d->swift_cpu),
                  per_gb(d->client_cpu));
    }
  }
  auto ratio = [&](const Direction& x, const Direction& y) {
    return rate(y) > 0 ? rate(x) / rate(y) : 0.0;
  };
  std::printf("\nratio headway S3 / aws s3 cp (throughput): up %.2f, down %.2f\n",
              ratio(a.up, b.up), ratio(a.down, b.down));
  std::printf("ratio headway local / headway S3 (throughput): up %.2f, down %.2f\n",
              ratio(c.up, a.up), ratio(c.down, a.down));
  std::printf("bytes round-trip: %s\n", ok ? "identical in every case" : "FAILED (see above)");

  return ok ? 0 : 1;
}
