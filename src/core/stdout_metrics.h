// Metrics in plain output lines, as Katib's default StdOut collector reads
// them: `name=value` pairs anywhere in a line ("epoch 3: loss=0.25
// accuracy=0.91"), kept only for the metric names a job lists in its
// `headway.dev/stdout-metrics` label (comma-separated; a Katib Experiment's
// objective and additional metrics). Code written for Katib reports
// unchanged; other jobs' output is never read this way.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "core/job.h"

namespace headway {

inline constexpr std::string_view kStdoutMetricsLabel = "headway.dev/stdout-metrics";

// The names a job's label lists; empty when it has none.
std::set<std::string> StdoutMetricNames(const JobSpec& spec);

// The listed metrics a line holds. A name may hold letters, digits, '_',
// '-', '|', '.' and '/'; a value is a decimal number with an optional
// exponent. A name given twice keeps its last value.
std::map<std::string, double> ParseStdoutMetrics(std::string_view line,
                                                 const std::set<std::string>& names);

}  // namespace headway
