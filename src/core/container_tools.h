// What the platform puts into every container of a job in an image.
#pragma once

#include <string_view>

namespace headway {

// A static busybox of the host's, read-only: the tools the platform's own
// wrappers (a workflow step's) use, so they need nothing of the image, as
// Argo's executor brings its own.
inline constexpr std::string_view kContainerBusybox = "/.headway/bin/busybox";

}  // namespace headway
