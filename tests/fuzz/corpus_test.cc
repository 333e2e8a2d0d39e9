// Replays every input kept under tests/fuzz/corpus/TARGET/ (seeds and the
// inputs that once crashed a parser) through the fuzz targets, so the
// ordinary test run, and its sanitizer pass, keep them fixed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_targets.h"

namespace headway::fuzz {
namespace {

namespace fs = std::filesystem;

int Replay(const std::string& target, void (*body)(const std::uint8_t*, std::size_t)) {
  int replayed = 0;
  fs::path dir = fs::path(HEADWAY_FUZZ_CORPUS) / target;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(entry.path().string());
    body(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ++replayed;
  }
  return replayed;
}

TEST(FuzzCorpus, JobSpec) { EXPECT_GT(Replay("job_spec", &FuzzJobSpec), 0); }
TEST(FuzzCorpus, ExperimentSpec) { EXPECT_GT(Replay("experiment_spec", &FuzzExperimentSpec), 0); }
TEST(FuzzCorpus, ProgressReport) { EXPECT_GT(Replay("progress_report", &FuzzProgressReport), 0); }
TEST(FuzzCorpus, KubeflowStatus) { EXPECT_GT(Replay("kubeflow_status", &FuzzKubeflowStatus), 0); }
TEST(FuzzCorpus, HttpRequest) { EXPECT_GT(Replay("http_request", &FuzzHttpRequest), 0); }
TEST(FuzzCorpus, S3Xml) { EXPECT_GT(Replay("s3_xml", &FuzzS3Xml), 0); }
TEST(FuzzCorpus, ArtifactRecord) { EXPECT_GT(Replay("artifact_record", &FuzzArtifactRecord), 0); }
TEST(FuzzCorpus, WorkflowManifest) {
  EXPECT_GT(Replay("workflow_manifest", &FuzzWorkflowManifest), 0);
}

}  // namespace
}  // namespace headway::fuzz
