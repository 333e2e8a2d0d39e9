// ObjectStore in a directory on the server's disk: the embedded default,
// nothing to set up. Objects are files at ROOT/KEY (0600), written by
// renaming a complete file into place, so a reader never sees a partial one.
#pragma once

#include <memory>
#include <string>

#include "artifact/object_store.h"

namespace headway {

// Creates `root` (0700) when missing. Unavailable when it cannot.
Result<std::unique_ptr<ObjectStore>> OpenLocalObjectStore(const std::string& root);

}  // namespace headway
