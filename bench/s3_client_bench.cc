// The S3 client (src/artifact/s3/s3_client.h) against a loopback Swift with
// s3api, side by side in one run: a signed PutObject against UNSIGNED-PAYLOAD
// (one read of the file instead of two), a multipart upload one part at a
// time against four at a time, and a GetObject. Prints MiB/s and the ratios;
// asserts nothing about time. Exit status non-zero only when a transfer fails.
//
//   build/bench/s3_client_bench [--mib 64]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../tests/s3/s3_server.h"
#include "artifact/s3/multipart.h"
#include "artifact/s3/s3_client.h"

using namespace headway;
using headway::testing::S3TestServer;

int main(int argc, char** argv) {
  std::uint64_t mib = 64;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mib") == 0) mib = std::strtoull(argv[++i], nullptr, 10);
  }
  const std::uint64_t size = mib * kMiB;
  S3TestServer server;
  if (!server.ok()) {
    std::fprintf(stderr, "S3 server: %s\n", server.error().c_str());
    return 1;
  }
  const std::string file = server.dir() + "/t.bin";
  {
    std::mt19937_64 random(4);
    std::vector<std::uint64_t> words(size / 8);
    for (auto& w : words) w = random();
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(size));
  }
  SystemClock clock;
  S3ClientOptions options;
  options.endpoint = server.endpoint();
  options.region = server.region();
  options.credentials = {server.access_key(), server.secret_key(), ""};
  options.multipart_threshold = size / 4;
  options.part_size = size / 4;
  auto client = S3Client::Create(options, clock);
  S3ClientOptions one_at_a_time = options;
  one_at_a_time.upload_concurrency = 1;
  auto sequential = S3Client::Create(one_at_a_time, clock);
  S3ClientOptions unsigned_options = options;
  unsigned_options.sign_payload = false;
  auto one_read = S3Client::Create(unsigned_options, clock);
  if (!client.ok() || !sequential.ok() || !one_read.ok()) return 1;
  const std::string bucket = "bench";
  if (!(*client)->CreateBucket(bucket).ok()) return 1;

  using Steady = std::chrono::steady_clock;
  std::vector<Steady::time_point> t{Steady::now()};
  auto step = [&](const char* what, bool ok) {
    t.push_back(Steady::now());
    if (!ok) {
      std::fprintf(stderr, "%s failed\n", what);
      std::exit(1);
    }
  };
  step("PutObject", (*client)->PutObject(bucket, "single", file).ok());
  step("Upload, one part at a time", (*sequential)->Upload(file, bucket, "multi1").ok());
  step("Upload, four at a time", (*client)->Upload(file, bucket, "multi4").ok());
  step("GetObject", (*client)->GetObject(bucket, "single", server.dir() + "/t.down").ok());
  step("PutObject UNSIGNED-PAYLOAD", (*one_read)->PutObject(bucket, "unsigned", file).ok());
  auto mibs = [&](int i) {
    return static_cast<double>(mib) / std::chrono::duration<double>(t[i + 1] - t[i]).count();
  };
  std::printf("S3 client on loopback Swift, %llu MiB (server started in %.1f s)\n",
              static_cast<unsigned long long>(mib), server.startup_seconds());
  std::printf("  PutObject signed %.0f MiB/s, UNSIGNED-PAYLOAD %.0f MiB/s: ratio %.2f\n", mibs(0),
              mibs(4), mibs(4) / mibs(0));
  std::printf(
      "  multipart 4 x %llu MiB: one part at a time %.0f MiB/s, four at a time %.0f MiB/s: "
      "ratio %.2f\n",
      static_cast<unsigned long long>(mib / 4), mibs(1), mibs(2), mibs(2) / mibs(1));
  std::printf("  GetObject %.0f MiB/s\n", mibs(3));
  std::filesystem::remove(server.dir() + "/t.down");
  return 0;
}
