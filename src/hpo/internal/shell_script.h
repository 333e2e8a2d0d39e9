// Putting trial parameter values into a shell script without letting them
// become code. Used by TrialJobSpec (experiment_spec.cc) and its tests; not
// part of the module's public interface. Pure functions; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headway::hpo::internal {

// The index in `argv` of the script a shell runs with -c: `/bin/sh -c S` (what
// a spec's command string becomes), `bash -lc S`, `env A=1 bash -c S`. None
// for any other program, or a shell running a script file.
std::optional<std::size_t> ShellScriptIndex(const std::vector<std::string>& argv);

// `value` as one shell word: unchanged when it holds only characters no shell
// treats specially (letters, digits, _ @ % + = : , . / -), else in single
// quotes with each ' written as '\''.
std::string ShellWord(std::string_view value);

// The value of a placeholder's NAME, or none to leave it as it is.
using PlaceholderValue = std::function<std::optional<std::string>(std::string_view name)>;

// `script` with every `${params.NAME}` replaced so that its value is data,
// whatever the placeholder stands in:
//   outside quotes, in $(...) or `...`   ShellWord(value)
//   inside '...'                         each ' closed and reopened ('\'')
//   inside "..."                         \ " $ ` backslash-escaped
//   in a here-document body              \ $ ` backslash-escaped (as is when
//                                        the delimiter is quoted)
// A backslash right before a placeholder is dropped: it would escape the
// quoting. Values must not hold line breaks (the experiment spec refuses
// control characters in categorical values).
std::string SubstituteInShellScript(std::string_view script, const PlaceholderValue& value_of);

}  // namespace headway::hpo::internal
