#include "cli/artifact_commands.h"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "artifact/file_digest.h"
#include "cli/artifact_upload.h"
#include "cli/job_table.h"
#include "core/artifact.h"

namespace headway::cli {

using nlohmann::json;

namespace {

// --- artifacts ---------------------------------------------------------------

std::string Bytes(std::uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return text;
}

// "NAME[:VERSION]" as the API path of that version ("latest" when none).
std::optional<std::string> ArtifactPath(const std::string& ref_text) {
  auto ref = ParseArtifactRef(ref_text);
  if (!ref.ok()) {
    std::cerr << "error: " << Safe(ref.status().message()) << "\n";
    return std::nullopt;
  }
  return "/api/v1/artifacts/" + UrlEncode(ref->name) + "/versions/" +
         (ref->version ? std::to_string(*ref->version) : std::string("latest"));
}

std::string ProducerText(const json& a) {
  const json& p = a.value("producer", json::object());
  if (!p.contains("job")) return p.contains("pipeline_node") ? FieldText(p, "pipeline_node") : "-";
  std::string text = "job/" + p["job"].get<std::string>();
  if (p.contains("step")) text += "@" + p["step"].dump();
  return text;
}

}  // namespace

int ArtifactsList(const Options& o) {
  Client client(o);
  std::string query;
  if (!o.kind.empty()) query += "&kind=" + UrlEncode(o.kind);
  if (!o.job.empty()) query += "&job=" + UrlEncode(o.job);
  if (!o.team.empty()) query += "&team=" + UrlEncode(o.team);
  if (!o.name.empty()) query += "&name=" + UrlEncode(o.name);
  auto list =
      client.Call("GET", "/api/v1/artifacts" + (query.empty() ? "" : "?" + query.substr(1)));
  if (!list) return client.exit_code;
  if (PrintStructured(o, *list)) return kExitOk;
  const json& items = (*list)["artifacts"];
  if (o.output == "name") {
    for (const auto& a : items) std::cout << Safe(a["ref"].get<std::string>()) << "\n";
    return kExitOk;
  }
  if (items.empty()) {
    std::cerr << "No artifacts found.\n";
    return kExitOk;
  }
  Time now = SystemClock().Now();
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : items) {
    rows.push_back({Safe(a["ref"].get<std::string>()), FieldText(a, "kind"), FieldText(a, "state"),
                    Bytes(a["size"].get<std::uint64_t>()), Safe(ProducerText(a)),
                    FieldText(a, "team"), Age(a["created_at"].get<std::string>(), now)});
  }
  std::cout << FormatTable({"ARTIFACT", "KIND", "STATE", "SIZE", "PRODUCER", "TEAM", "AGE"}, rows);
  return kExitOk;
}

int ArtifactsPut(const Options& o) {
  auto digest = DigestFile(o.file);
  if (!digest.ok()) {
    std::cerr << "error: " << Safe(digest.status().message()) << "\n";
    return kExitUsage;
  }
  json body = {{"name", o.name},
               {"kind", o.kind.empty() ? "output" : o.kind},
               {"size", digest->size},
               {"digest", digest->digest},
               {"content_md5", digest->content_md5},
               {"multipart", true}};
  if (!o.team.empty()) body["team"] = o.team;
  if (!o.job.empty() || o.step >= 0) {
    json producer = json::object();
    if (!o.job.empty()) producer["job"] = o.job;
    if (o.step >= 0) producer["step"] = o.step;
    body["producer"] = producer;
  }
  for (const std::string& label : o.labels) {
    auto eq = label.find('=');
    if (eq == std::string::npos) {
      std::cerr << "error: --label must be KEY=VALUE, got '" << Safe(label) << "'\n";
      return kExitUsage;
    }
    body["labels"][label.substr(0, eq)] = label.substr(eq + 1);
  }
  for (const std::string& metric : o.metrics) {
    auto eq = metric.find('=');
    double value = 0;
    try {
      if (eq == std::string::npos) throw std::invalid_argument("no =");
      std::size_t used = 0;
      value = std::stod(metric.substr(eq + 1), &used);
      if (used != metric.size() - eq - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      std::cerr << "error: --metric must be NAME=NUMBER, got '" << Safe(metric) << "'\n";
      return kExitUsage;
    }
    body["metrics"][metric.substr(0, eq)] = value;
  }
  Client client(o);
  auto created = client.Call("POST", "/api/v1/artifacts", body.dump());
  if (!created) return client.exit_code;
  json artifact = (*created)["artifact"];
  const json& upload = (*created)["upload"];
  std::optional<PartsUploaded> parts;
  if (upload.is_object() && upload.contains("multipart")) {
    // In parts, straight to the object store; resumes what an earlier try left.
    const std::string version_path = "/api/v1/artifacts/" +
                                     UrlEncode(artifact["name"].get<std::string>()) + "/versions/" +
                                     artifact["version"].dump();
    auto sent = UploadParts(client.http(), version_path, o.file, digest->size, upload["multipart"],
                            Client::CaFile(o));
    if (!sent.ok()) {
      std::cerr
          << "error: " << Safe(sent.status().message())
          << "\nRun the same command again to resume: parts already stored are not sent again.\n";
      return kExitUnreachable;
    }
    parts = *sent;
    json commit = {{"upload_id", upload["multipart"]["upload_id"]}};
    auto committed = client.Call("POST", version_path + "/commit", commit.dump());
    if (!committed) return client.exit_code;
    artifact = *committed;
  } else if (upload.is_object()) {
    const std::string url = upload["url"].get<std::string>();
    if (!url.empty() && url.front() == '/') {
      // Through the server (its local store).
      auto sent = client.http().SendFile("PUT", url, o.file);
      if (!sent.ok()) {
        std::cerr << "error: " << Safe(sent.status().message()) << "\n";
        return kExitUnreachable;
      }
      auto parsed = json::parse(sent->body, nullptr, false);
      if (sent->status >= 400) {
        Client::PrintError(sent->status, parsed, sent->body);
        return kExitFailed;
      }
      artifact = parsed;
    } else {
      // Straight to the object store, with the presigned URL; then the server checks it.
      auto [origin, target] = api::SplitUrl(url);
      std::vector<std::pair<std::string, std::string>> headers;
      const json upload_headers = upload.value("headers", json::object());
      for (const auto& [k, v] : upload_headers.items()) {
        if (k != "Content-Length") headers.emplace_back(k, v.get<std::string>());
      }
      HttpClient store(origin, "", Client::CaFile(o));
      auto sent = store.SendFile(upload.value("method", "PUT"), target, o.file, headers);
      if (!sent.ok()) {
        std::cerr << "error: uploading to the object store: " << Safe(sent.status().message())
                  << "\n";
        return kExitUnreachable;
      }
      if (sent->status >= 300) {
        std::cerr << "error: the object store answered " << sent->status << ": "
                  << Safe(sent->body.substr(0, 300)) << "\n";
        return kExitFailed;
      }
      auto committed = client.Call(
          "POST", "/api/v1/artifacts/" + UrlEncode(artifact["name"].get<std::string>()) +
                      "/versions/" + artifact["version"].dump() + "/commit");
      if (!committed) return client.exit_code;
      artifact = *committed;
    }
  }
  if (PrintStructured(o, artifact)) return kExitOk;
  std::cout << "artifact/" << Safe(artifact["ref"].get<std::string>())
            << (upload.is_object() ? " uploaded" : " stored (its bytes were there already)") << " ("
            << Bytes(artifact["size"].get<std::uint64_t>()) << ", "
            << Safe(artifact["digest"].get<std::string>()) << ")";
  if (parts) {
    std::cout << " in " << parts->parts << " parts";
    if (parts->reused > 0) std::cout << ", " << parts->reused << " of them stored already";
  }
  std::cout << "\n";
  return kExitOk;
}

int ArtifactsGet(const Options& o) {
  auto path = ArtifactPath(o.name);
  if (!path) return kExitUsage;
  Client client(o);
  auto described = client.Call("GET", *path);
  if (!described) return client.exit_code;
  const std::string ref = (*described)["ref"].get<std::string>();
  std::string destination =
      o.destination.empty() ? (*described)["name"].get<std::string>() : o.destination;
  if (std::filesystem::is_directory(destination)) {
    destination += "/" + (*described)["name"].get<std::string>();
  }
  // Written beside the destination and moved into place once its digest checks.
  const std::string partial = destination + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "error: cannot write " << Safe(partial) << "\n";
    return kExitFailed;
  }
  std::string error_body;
  auto write = [&out](std::string_view data) {
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
  };
  auto status = client.http().Stream("/api/v1/artifacts/" +
                                         UrlEncode((*described)["name"].get<std::string>()) +
                                         "/versions/" + (*described)["version"].dump() + "/content",
                                     write, error_body);
  if (status.ok() && *status == 307) {
    // The bytes are in an object store: read them from there.
    json redirect = json::parse(error_body, nullptr, false);
    std::string url = redirect.is_object() ? redirect.value("url", "") : "";
    auto [origin, target] = api::SplitUrl(url);
    HttpClient store(origin, "", Client::CaFile(o));
    error_body.clear();
    status = store.Stream(target, write, error_body);
  }
  out.close();
  if (!status.ok() || *status >= 300) {
    std::filesystem::remove(partial);
    if (!status.ok()) {
      std::cerr << "error: " << Safe(status.status().message()) << "\n";
      return kExitUnreachable;
    }
    Client::PrintError(*status, json::parse(error_body, nullptr, false), error_body);
    return kExitFailed;
  }
  auto got = DigestFile(partial);
  if (!got.ok() || got->digest != (*described)["digest"].get<std::string>()) {
    std::filesystem::remove(partial);
    std::cerr << "error: the bytes received for " << Safe(ref)
              << " do not match its digest; nothing was written\n";
    return kExitFailed;
  }
  std::filesystem::rename(partial, destination);
  std::cout << Safe(ref) << " -> " << Safe(destination) << " (" << Bytes(got->size) << ")\n";
  return kExitOk;
}

int ArtifactsDescribe(const Options& o, bool lineage_only) {
  auto path = ArtifactPath(o.name);
  if (!path) return kExitUsage;
  Client client(o);
  auto a = client.Call("GET", *path);
  if (!a) return client.exit_code;
  if (PrintStructured(o, *a)) return kExitOk;
  const json& j = *a;
  const json& lineage = j["lineage"];
  if (!lineage_only) {
    std::cout << "Artifact:  " << Safe(j["ref"].get<std::string>()) << "\n"
              << "Kind:      " << FieldText(j, "kind") << "\n"
              << "State:     " << FieldText(j, "state") << "\n"
              << "Team:      " << FieldText(j, "team") << "\n"
              << "Size:      " << Bytes(j["size"].get<std::uint64_t>()) << "\n"
              << "Digest:    " << FieldText(j, "digest") << "\n"
              << "Created:   " << FieldText(j, "created_at") << " by " << FieldText(j, "created_by")
              << "\n";
    if (!j["metrics"].empty()) {
      std::cout << "Metrics:  ";
      for (const auto& [k, v] : j["metrics"].items())
        std::cout << " " << Safe(k) << "=" << Safe(v.dump());
      std::cout << "\n";
    }
    if (!j["labels"].empty()) {
      std::cout << "Labels:   ";
      for (const auto& [k, v] : j["labels"].items()) {
        std::cout << " " << Safe(k) << "=" << Safe(v.get<std::string>());
      }
      std::cout << "\n";
    }
  }
  std::cout << "Produced by: " << Safe(ProducerText(j));
  if (lineage["producer"].is_object() && lineage["producer"]["state"].is_string()) {
    std::cout << " (" << Safe(lineage["producer"]["state"].get<std::string>()) << ")";
  }
  std::cout << "\n";
  if (!lineage["inputs"].empty()) {
    std::cout << "  which read:\n";
    for (const auto& u : lineage["inputs"])
      std::cout << "    " << Safe(u["artifact"].get<std::string>()) << "\n";
  }
  std::cout << "Used by:" << (lineage["used_by"].empty() ? " none\n" : "\n");
  for (const auto& u : lineage["used_by"]) {
    std::cout << "  job/" << Safe(u["job"].get<std::string>()) << " at "
              << Safe(u["used_at"].get<std::string>()) << "\n";
  }
  return kExitOk;
}

int ArtifactsRemove(const Options& o) {
  auto ref = ParseArtifactRef(o.name);
  if (!ref.ok() || !ref->version) {
    std::cerr << "error: name the version to delete, as NAME:VERSION\n";
    return kExitUsage;
  }
  Client client(o);
  auto deleted = client.Call("DELETE", "/api/v1/artifacts/" + UrlEncode(ref->name) + "/versions/" +
                                           std::to_string(*ref->version));
  if (!deleted) return client.exit_code;
  std::cout << "artifact/" << Safe((*deleted)["deleted"].get<std::string>()) << " deleted\n";
  return kExitOk;
}

}  // namespace headway::cli
