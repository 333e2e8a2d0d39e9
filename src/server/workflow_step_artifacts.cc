// The workflow controller's artifacts of steps: what a finished step left
// under its artifacts/ folder goes to the store, and a step's input
// artifacts are staged where its wrapper copies them from.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "artifact/file_digest.h"
#include "core/artifact.h"
#include "server/workflow_controller.h"
#include "server/workflow_shared.h"

namespace headway {

using nlohmann::json;
namespace wf = workflow;
using workflow_shared::kInputsDir;
using workflow_shared::OpenDirNoFollow;
using workflow_shared::RandomNameSuffix;

void WorkflowController::IngestArtifacts(const Live& live, const std::string& job, int step_fd,
                                         wf::JobObservation& seen) {
  int dir_fd = OpenDirNoFollow(step_fd, "artifacts");
  if (dir_fd < 0) return;
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    ::close(dir_fd);
    return;
  }
  std::string node_name;
  std::map<std::string, std::string> names_by_key;  // outputs with an s3.key
  for (const auto& [id, node] : live.state.nodes) {
    if (node.job != job) continue;
    node_name = node.name;
    names_by_key = node.artifact_names;
  }
  std::vector<std::string> entries;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") entries.push_back(name);
  }
  for (const std::string& entry : entries) {
    const bool tar = entry.size() > 4 && entry.compare(entry.size() - 4, 4, ".tar") == 0;
    const std::string artifact = tar ? entry.substr(0, entry.size() - 4) : entry;
    if (!wf::IsValidParameterName(artifact)) continue;
    if (artifacts_ == nullptr) {
      seen.artifact_error = "outputs.artifacts." + artifact + ": this server keeps no artifacts";
      break;
    }
    std::string stored_name;
    if (auto key = names_by_key.find(artifact); key != names_by_key.end()) {
      stored_name = key->second;
    } else {
      for (char c : job + "." + artifact) {
        stored_name += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      }
    }
    // Stored already (a pass that stored it and then crashed): the same version.
    ArtifactFilter mine;
    mine.name = stored_name;
    mine.job = job;
    mine.ready_only = true;
    if (auto found = artifacts_->List(mine); found.ok() && !found->empty()) {
      seen.artifacts[artifact] = found->back().Ref();
      continue;
    }
    // A copy the job cannot change or point elsewhere: read through the
    // descriptor (never a link), written to a file of the server's.
    std::error_code ec;
    std::filesystem::create_directories(data_dir_ + "/uploads", ec);
    const std::string copy = data_dir_ + "/uploads/" + stored_name + "." + RandomNameSuffix();
    int in = ::openat(::dirfd(dir), entry.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st {};
    bool copied = false;
    const bool regular = in >= 0 && ::fstat(in, &st) == 0 && S_ISREG(st.st_mode);
    // The quota is checked before the bytes are copied: a step cannot fill
    // the server's disk with an output its team has no room for.
    Status room =
        regular ? artifacts_->CheckRoom(live.record.team, static_cast<std::uint64_t>(st.st_size))
                : Status::Ok();
    if (!room.ok()) {
      ::close(in);
      seen.artifact_error = "outputs.artifacts." + artifact + ": " + room.message();
      break;
    }
    if (regular) {
      int out = ::open(copy.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (out >= 0) {
        copied = true;
        char buffer[1 << 16];
        for (;;) {
          ssize_t n = ::read(in, buffer, sizeof buffer);
          if (n == 0) break;
          if (n < 0 || ::write(out, buffer, static_cast<std::size_t>(n)) != n) {
            copied = false;
            break;
          }
        }
        ::close(out);
      }
    }
    if (in >= 0) ::close(in);
    auto fail = [&](const std::string& why) {
      std::filesystem::remove(copy, ec);
      seen.artifact_error = "outputs.artifacts." + artifact + ": " + why;
    };
    if (!copied) {
      fail("cannot read what the step left (not a plain file)");
      break;
    }
    auto digest = DigestFile(copy);
    if (!digest.ok()) {
      fail(digest.status().message());
      break;
    }
    Artifact draft;
    draft.name = stored_name;
    draft.kind = ArtifactKind::kOutput;
    draft.team = live.record.team;
    draft.created_by = "job/" + job;
    draft.size = digest->size;
    draft.digest = digest->digest;
    draft.content_md5 = digest->content_md5;
    draft.producer.job = job;
    draft.producer.pipeline_node = node_name;
    draft.labels["headway.dev/workflow"] = live.record.name;
    draft.labels["headway.dev/archive"] = tar ? "tar" : "none";
    auto created = artifacts_->Create(draft, /*client_multipart=*/false);
    if (!created.ok()) {
      fail(created.status().message());
      break;
    }
    Artifact stored = created->artifact;
    if (stored.state != ArtifactState::kReady) {
      auto received = artifacts_->Receive(stored.name, stored.version, copy);
      if (!received.ok()) {
        fail(received.status().message());
        break;
      }
      stored = *received;
    }
    std::filesystem::remove(copy, ec);
    seen.artifacts[artifact] = stored.Ref();
  }
  ::closedir(dir);
}

Status WorkflowController::StageInputs(const Live& live, const wf::JobToCreate& job) {
  if (job.input_artifacts.empty()) return Status::Ok();
  const std::string dir = data_dir_ + "/jobs/" + job.spec.name + "/home/" + kInputsDir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Unavailable("cannot stage input artifacts in " + dir + ": " + ec.message());
  for (const wf::InputArtifact& in : job.input_artifacts) {
    const std::string where = "inputs.artifacts." + in.name + ": ";
    if (in.raw) {
      std::ofstream out(dir + "/" + in.name, std::ios::binary | std::ios::trunc);
      out << *in.raw;
      if (!out) return Unavailable(where + "cannot write it");
      continue;
    }
    if (artifacts_ == nullptr) return Unavailable(where + "this server keeps no artifacts");
    auto ref = ParseArtifactRef(in.ref);
    if (!ref.ok()) return InvalidArgument(where + ref.status().message());
    auto artifact = artifacts_->Get(ref->name, ref->version);
    if (!artifact.ok())
      return artifact.status().code() == StatusCode::kNotFound
                 ? NotFound(where + "no artifact " + in.ref)
                 : artifact.status();
    // A workflow reads its own team's artifacts only.
    if (artifact->team != live.record.team) return NotFound(where + "no artifact " + in.ref);
    const bool tar = artifact->labels.count("headway.dev/archive") &&
                     artifact->labels.at("headway.dev/archive") == "tar";
    ArtifactUse use;
    use.job = job.spec.name;
    HEADWAY_RETURN_IF_ERROR(artifacts_->Fetch(artifact->name, artifact->version,
                                              dir + "/" + in.name + (tar ? ".tar" : ""), use));
  }
  // Readable by the job's account (the job's home, 0700 and its own, keeps
  // everyone else out); not writable: they stay as the store gave them.
  std::filesystem::permissions(dir, std::filesystem::perms(0755), ec);
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::filesystem::permissions(entry.path(), std::filesystem::perms(0644), ec);
  }
  return Status::Ok();
}

}  // namespace headway
