// The text a progress log row holds (sql_store_progress.cc, AppendProgress): the
// reports of one request, written once when they are acknowledged and read
// back once when the log is folded into the series chunks. A compact line per
// report rather than JSON: encoding sits on the path of every report, and
// values must come back bit for bit (NaN and the infinities included).
// Internal to store/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/progress_report.h"
#include "core/status.h"

namespace headway::sql {

// `reports` as one or more texts of about `max_bytes` at most (a report is
// never split), each standing alone. A report without a time gets
// `received`, as the series chunks store it.
std::vector<std::string> EncodeProgressLog(const std::vector<ProgressReport>& reports,
                                           std::int64_t received_millis,
                                           std::size_t max_bytes = 1 << 20);

// Calls `visit` for each report of `text` in order; its time is always set.
// A text EncodeProgressLog did not write is InvalidArgument, naming where.
Status DecodeProgressLog(std::string_view text,
                         const std::function<void(const ProgressReport&)>& visit);

}  // namespace headway::sql
