#include "cli/artifact_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "artifact/file_digest.h"
#include "artifact/s3/sigv4.h"

namespace headway::cli {
namespace {

using nlohmann::json;

constexpr int kAttemptsPerPart = 3;

// The server's error message from a failed response.
std::string ServerError(const api::ClientResponse& r) {
  json parsed = json::parse(r.body, nullptr, false);
  if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_object()) {
    return parsed["error"].value("message", "HTTP " + std::to_string(r.status));
  }
  return "HTTP " + std::to_string(r.status);
}

struct StoredPart {
  std::uint64_t size = 0;
  std::string etag;
};

}  // namespace

Result<PartsUploaded> UploadParts(api::HttpClient& server, const std::string& version_path,
                                  const std::string& path, std::uint64_t size, const json& plan,
                                  const std::string& ca_file, int concurrency) {
  if (!plan.is_object() || !plan.contains("upload_id") || !plan["upload_id"].is_string() ||
      !plan.contains("part_size") || !plan["part_size"].is_number_unsigned() ||
      !plan.contains("part_count") || !plan["part_count"].is_number_integer()) {
    return Unavailable("the server's multipart plan is malformed: " + plan.dump());
  }
  const std::string upload_id = plan["upload_id"].get<std::string>();
  const std::uint64_t part_size = plan["part_size"].get<std::uint64_t>();
  const int part_count = plan["part_count"].get<int>();
  if (part_size == 0 || part_count < 1 ||
      (static_cast<std::uint64_t>(part_count) - 1) * part_size >=
          std::max<std::uint64_t>(size, 1)) {
    return Unavailable("the server's multipart plan does not fit a file of " +
                       std::to_string(size) + " bytes");
  }

  // What the store holds already.
  auto listed = server.Request(
      "GET", version_path + "/parts?upload_id=" + UriEncode(upload_id, /*keep_slash=*/false));
  if (!listed.ok()) return listed.status();
  if (listed->status >= 300)
    return Unavailable("listing the uploaded parts: " + ServerError(*listed));
  json parts_json = json::parse(listed->body, nullptr, false);
  std::map<int, StoredPart> stored;
  if (parts_json.is_object() && parts_json["parts"].is_array()) {
    for (const json& p : parts_json["parts"]) {
      if (!p.is_object() || !p.value("number", json()).is_number_integer()) continue;
      stored[p["number"].get<int>()] = {p.value("size", std::uint64_t{0}), p.value("etag", "")};
    }
  }

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Unavailable("cannot read " + path + ": " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};

  std::atomic<int> next{1}, reused{0}, sent{0};
  std::atomic<bool> failed{false};
  std::mutex error_mu;
  Status first_error = Status::Ok();
  auto fail = [&](Status s) {
    std::lock_guard lock(error_mu);
    if (first_error.ok()) first_error = std::move(s);
    failed = true;
  };

  // Each worker takes the next part: hashes it, skips it when the store has
  // it, else asks for a request bound to its MD5 and sends it.
  auto worker = [&] {
    for (int n = next++; n <= part_count && !failed; n = next++) {
      const std::uint64_t offset = static_cast<std::uint64_t>(n - 1) * part_size;
      const std::uint64_t length = n < part_count ? part_size : size - offset;
      const std::string which = "part " + std::to_string(n) + " of " + std::to_string(part_count);
      auto digest = DigestRange(fd, path, offset, length);
      if (!digest.ok()) return fail(digest.status());
      if (auto it = stored.find(n);
          it != stored.end() && it->second.size == length && it->second.etag == digest->md5_hex) {
        ++reused;
        continue;
      }
      json ask = {{"upload_id", upload_id},
                  {"parts", json::array({{{"number", n}, {"content_md5", digest->md5_base64}}})}};
      auto presigned = server.Request("POST", version_path + "/parts", ask.dump());
      if (!presigned.ok()) return fail(presigned.status());
      if (presigned->status >= 300) {
        return fail(Unavailable("presigning " + which + ": " + ServerError(*presigned)));
      }
      json answer = json::parse(presigned->body, nullptr, false);
      if (!answer.is_object() || !answer["parts"].is_array() || answer["parts"].size() != 1 ||
          !answer["parts"][0].value("url", json()).is_string()) {
        return fail(Unavailable("presigning " + which + ": the server's answer is malformed"));
      }
      const json& request = answer["parts"][0];
      std::vector<std::pair<std::string, std::string>> headers;
      const json request_headers = request.value("headers", json::object());
      for (const auto& [k, v] : request_headers.items()) {
        if (k != "Content-Length" && v.is_string()) headers.emplace_back(k, v.get<std::string>());
      }
      auto [origin, target] = api::SplitUrl(request["url"].get<std::string>());
      api::HttpClient store(origin, "", ca_file);
      Status last = Status::Ok();
      for (int attempt = 1; attempt <= kAttemptsPerPart && !failed; ++attempt) {
        auto put = store.SendFileRange(request.value("method", "PUT"), target, path, offset, length,
                                       headers);
        if (put.ok() && put->status < 300) {
          last = Status::Ok();
          break;
        }
        last = put.ok() ? Unavailable("the object store answered " + std::to_string(put->status) +
                                      " to " + which + ": " + put->body.substr(0, 300))
                        : Unavailable("sending " + which + ": " + put.status().message());
        // A 4xx (a refused signature, a wrong MD5) will not change on a retry.
        if (put.ok() && put->status < 500) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(250 * attempt));
      }
      if (!last.ok()) return fail(last);
      ++sent;
    }
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < std::clamp(concurrency, 1, part_count); ++i) workers.emplace_back(worker);
  for (std::thread& t : workers) t.join();
  if (!first_error.ok()) return first_error;
  return PartsUploaded{part_count, reused.load(), sent.load()};
}

}  // namespace headway::cli
