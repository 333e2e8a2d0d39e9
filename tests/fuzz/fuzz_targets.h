// The bodies of the fuzz targets, one per parser of untrusted input. Each
// takes arbitrary bytes, must never crash, hang or trip a sanitizer, and
// checks the parser's own promises (a parsed spec reads back unchanged from
// its canonical JSON; decoded reports obey the documented limits) with
// FUZZ_CHECK, which aborts so the fuzzer keeps the input.
//
// Built two ways: as libFuzzer binaries (clang, -fsanitize=fuzzer; see
// scripts/fuzz) and into the ordinary unit tests, which replay every input
// under tests/fuzz/corpus/ so crashes found once stay fixed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace headway::fuzz {

void FuzzJobSpec(const std::uint8_t* data, std::size_t size);
void FuzzExperimentSpec(const std::uint8_t* data, std::size_t size);
void FuzzProgressReport(const std::uint8_t* data, std::size_t size);
// A Kubeflow Trainer status update body (api/kubeflow_status.h).
void FuzzKubeflowStatus(const std::uint8_t* data, std::size_t size);
// A raw HTTP/1.1 request as it arrives on the socket: Beast's parser, then
// Headway's target decoding and routing through the REST API.
void FuzzHttpRequest(const std::uint8_t* data, std::size_t size);
// The body of POST /api/v1/artifacts (api/artifact_json.h).
void FuzzArtifactRecord(const std::uint8_t* data, std::size_t size);
// An S3 server's XML answer (artifact/s3/s3_xml.h): listings, multipart, errors.
void FuzzS3Xml(const std::uint8_t* data, std::size_t size);
// An Argo manifest (workflow/manifest.h): Workflow, WorkflowTemplate, CronWorkflow.
void FuzzWorkflowManifest(const std::uint8_t* data, std::size_t size);

}  // namespace headway::fuzz
