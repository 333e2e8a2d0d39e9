// Loop expansion of a step or DAG task: withItems, withParam, withSequence.
// Each item becomes one child node; this computes, per item, the child's name
// suffix and the `{{item}}` / `{{item.KEY}}` variables, exactly as Argo's
// controller does (workflow/controller/operator.go processItem,
// expandSequence), because node names are user-visible: the UI, `argo get`,
// Hera and scripts that read node status rely on them.
//
// Naming (Argo generateNodeName "%s(%d:%v)"): the suffix is
// "(INDEX:DESCRIPTION)" where DESCRIPTION is
//   * a string item: the string                      A(0:apple)
//   * a number:      its JSON text                   A(1:2.5)
//   * a bool:        true / false                    A(2:true)
//   * a map:         "key:value" pairs sorted, joined by ","   A(3:a:1,b:x)
//   * a list:        Go's "%v" of the values         A(4:[1 2])
// and `{{item}}` is the string, the number's text, true/false, or the JSON of
// a map or list (keys sorted, compact); `{{item.KEY}}` is a map value rendered
// the same way.
//
// Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "workflow/substitute.h"

namespace headway::workflow {

// More items than this in one loop is refused (a runaway withParam or
// withSequence would otherwise create that many jobs).
inline constexpr size_t kMaxLoopItems = 10000;

struct LoopItem {
  size_t index = 0;
  nlohmann::json value;     // the item as JSON (sequence items are strings)
  std::string node_suffix;  // "(0:apple)": the child node is PARENT_NAME + node_suffix
  Scope vars;               // "item", and "item.KEY" for map items
};

// withItems: `items` must be a JSON array of strings, numbers, booleans,
// maps or lists. InvalidArgument "withItems[3]: ..." for null items, for a
// value that is not an array, and for more than kMaxLoopItems items.
Result<std::vector<LoopItem>> ExpandWithItems(const nlohmann::json& items);
Result<std::vector<LoopItem>> ExpandWithItems(const std::vector<nlohmann::json>& items);

// withParam: `text` is the parameter after substitution and must be a JSON
// array (Argo: "withParam value could not be parsed as a JSON list: ...").
// An empty array gives no items (Argo then marks the step Skipped, "Skipped,
// empty params").
Result<std::vector<LoopItem>> ExpandWithParam(std::string_view text);

// withSequence, with its numbers as strings after substitution (the manifest
// may hold 5 or "5" or "{{inputs.parameters.n}}"): the `text` of the
// manifest's IntOrString fields (workflow.h Sequence).
struct LoopSequence {
  std::optional<std::string> count;
  std::optional<std::string> start;  // default 0
  std::optional<std::string> end;
  std::string format;  // printf-style, default "%d"
};

// Argo expandSequence: items start, start+1, ..., end (or start, start-1,
// ..., end when start > end); with count, `count` items from start (0 items
// for count 0). Each item is the string fmt.Sprintf(format, value); format
// takes exactly one integer verb: %d %v %x %X %o %b with flags "-+ 0#",
// width and precision ("%02d", "%-4d", "%x"), plus %% for a percent sign.
// InvalidArgument for: both or neither of count and end, a non-integer or
// negative count, a bad format, more than kMaxLoopItems items.
Result<std::vector<LoopItem>> ExpandWithSequence(const LoopSequence& seq);

// Go's fmt.Sprintf(format, int64(value)) for the formats ExpandWithSequence
// accepts.
Result<std::string> FormatSequenceValue(std::string_view format, int64_t value);

// How Argo prints an item value inside names and variables: strings as they
// are, numbers as JSON numbers (FormatJsonNumber for non-integers), booleans,
// maps and lists as compact JSON with sorted keys.
std::string ItemString(const nlohmann::json& value);

}  // namespace headway::workflow
