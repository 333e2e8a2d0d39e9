// The artifact behaviours every object store must give, written once as
// value-parameterised tests (ArtifactStoreTest): artifact_test.cc runs them
// on the local store, tests/s3/artifact_s3_test.cc on a real S3 server that
// checks signatures.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "test_server.h"

namespace headway::testing {

// A server keeping its artifacts in one kind of store, and a count of the
// objects that store holds for it.
struct ServerWithStore {
  std::unique_ptr<TestServer> server;
  std::function<std::size_t()> stored_objects;
};

struct ArtifactStoreKind {
  std::string name;  // "Local", "S3": the instantiation's name
  // Starts a server with `gpus` GPUs and `flags`, its artifacts in a fresh store.
  std::function<ServerWithStore(int gpus, const std::vector<std::string>& flags)> start;
};

// Names the kind in test output (gtest would print the struct's bytes).
inline void PrintTo(const ArtifactStoreKind& kind, std::ostream* os) { *os << kind.name; }

class ArtifactStoreTest : public ::testing::TestWithParam<ArtifactStoreKind> {
 protected:
  ServerWithStore Start(int gpus = 0, const std::vector<std::string>& flags = {}) {
    return GetParam().start(gpus, flags);
  }
};

// Writes `size` pseudo-random bytes (from `seed`) to `path` and returns them.
std::string RandomFile(const std::string& path, std::size_t size, unsigned seed);

// The objects under `dir`, a local store's root.
std::size_t FilesUnder(const std::string& dir);

}  // namespace headway::testing
