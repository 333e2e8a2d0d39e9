#include "hpo/internal/shell_script.h"

#include <algorithm>
#include <set>

namespace headway::hpo::internal {
namespace {

constexpr std::string_view kPlaceholder = "${params.";

std::string Basename(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

enum class Quote { kNone, kSingle, kDouble };

// One nesting level of the script: top level, or inside $(...) or `...`.
struct Level {
  Quote quote = Quote::kNone;
  char closer = 0;  // ')' or '`'; 0 at top level
  int parens = 0;   // open plain parentheses inside a $(...)
};

struct HereDoc {
  std::string delimiter;
  bool quoted = false;      // <<'EOF': the body is taken literally
  bool strip_tabs = false;  // <<-EOF
};

bool EndsWord(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|' || c == '<' ||
         c == '>' || c == '(' || c == ')';
}

class Substituter {
 public:
  Substituter(std::string_view script, const PlaceholderValue& value_of)
      : s_(script), value_of_(value_of) {}

  std::string Run() {
    while (i_ < s_.size()) {
      if (!heredocs_.empty() && in_body_) {
        Body();
      } else {
        Code();
      }
    }
    return out_;
  }

 private:
  // The placeholder at `at`: its length and value.
  std::optional<std::pair<std::size_t, std::string>> PlaceholderAt(std::size_t at) const {
    if (s_.substr(at, kPlaceholder.size()) != kPlaceholder) return std::nullopt;
    std::size_t begin = at + kPlaceholder.size();
    std::size_t end = s_.find('}', begin);
    if (end == std::string_view::npos) return std::nullopt;
    auto value = value_of_(s_.substr(begin, end - begin));
    if (!value) return std::nullopt;
    return std::pair<std::size_t, std::string>{end + 1 - at, std::move(*value)};
  }

  void AppendEscaped(const std::string& value, std::string_view special) {
    for (char c : value) {
      if (special.find(c) != std::string_view::npos) out_ += '\\';
      out_ += c;
    }
  }

  // One step in shell code (not a here-document body).
  void Code() {
    Level& level = levels_.back();
    if (auto p = PlaceholderAt(i_)) {
      switch (level.quote) {
        case Quote::kNone:
          out_ += ShellWord(p->second);
          break;
        case Quote::kSingle:
          for (char c : p->second) out_ += c == '\'' ? std::string("'\\''") : std::string(1, c);
          break;
        case Quote::kDouble:
          AppendEscaped(p->second, "\\\"$`");
          break;
      }
      i_ += p->first;
      return;
    }
    char c = s_[i_];
    char next = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
    if (level.quote == Quote::kSingle) {
      if (c == '\'') level.quote = Quote::kNone;
      Copy(1);
      return;
    }
    if (c == '\\') {
      if (PlaceholderAt(i_ + 1)) {
        ++i_;  // dropped: the value is quoted for its context instead
      } else {
        Copy(2);
      }
      return;
    }
    if (c == '$' && next == '(') {
      Copy(2);
      levels_.push_back({Quote::kNone, ')', 0});
      return;
    }
    if (c == '`') {
      Copy(1);
      if (level.closer == '`' && levels_.size() > 1) {
        levels_.pop_back();
      } else {
        levels_.push_back({Quote::kNone, '`', 0});
      }
      return;
    }
    if (level.quote == Quote::kDouble) {
      if (c == '"') level.quote = Quote::kNone;
      Copy(1);
      return;
    }
    // Outside quotes.
    if (c == '#' && (out_.empty() || EndsWord(out_.back()))) {
      // A comment, to the end of the line: its quotes are not quotes.
      std::size_t end = s_.find('\n', i_);
      Copy((end == std::string_view::npos ? s_.size() : end) - i_);
      return;
    }
    if (c == '\'') level.quote = Quote::kSingle;
    if (c == '"') level.quote = Quote::kDouble;
    if (c == '(' && level.closer == ')') ++level.parens;
    if (c == ')' && level.closer == ')') {
      Copy(1);
      if (level.parens > 0) {
        --level.parens;
      } else if (levels_.size() > 1) {
        levels_.pop_back();
      }
      return;
    }
    if (c == '<' && next == '<' && (i_ + 2 >= s_.size() || s_[i_ + 2] != '<')) {
      HereDocOperator();
      return;
    }
    if (c == '\n' && !heredocs_.empty()) in_body_ = true;
    Copy(1);
  }

  // "<<[-] WORD": remember the here-document whose body starts on the next line.
  void HereDocOperator() {
    Copy(2);
    HereDoc doc;
    if (i_ < s_.size() && s_[i_] == '-') {
      doc.strip_tabs = true;
      Copy(1);
    }
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) Copy(1);
    while (i_ < s_.size() && !EndsWord(s_[i_])) {
      char c = s_[i_];
      if (c == '\'' || c == '"') {
        doc.quoted = true;
        std::size_t end = s_.find(c, i_ + 1);
        if (end == std::string_view::npos) end = s_.size() - 1;
        doc.delimiter += s_.substr(i_ + 1, end - i_ - 1);
        Copy(end + 1 - i_);
      } else if (c == '\\') {
        doc.quoted = true;
        if (i_ + 1 < s_.size()) doc.delimiter += s_[i_ + 1];
        Copy(2);
      } else {
        doc.delimiter += c;
        Copy(1);
      }
    }
    heredocs_.push_back(std::move(doc));
  }

  // One line of the first pending here-document's body.
  void Body() {
    const HereDoc& doc = heredocs_.front();
    std::size_t end = s_.find('\n', i_);
    if (end == std::string_view::npos) end = s_.size();
    std::string_view line = s_.substr(i_, end - i_);
    std::string_view bare = line;
    if (doc.strip_tabs) bare.remove_prefix(std::min(bare.find_first_not_of('\t'), bare.size()));
    if (bare == doc.delimiter) {
      Copy(std::min(end + 1, s_.size()) - i_);
      heredocs_.erase(heredocs_.begin());
      in_body_ = !heredocs_.empty();
      return;
    }
    while (i_ < end) {
      auto p = PlaceholderAt(i_);
      if (p) {
        if (doc.quoted) {
          out_ += p->second;
        } else {
          AppendEscaped(p->second, "\\$`");
        }
        i_ += p->first;
      } else if (!doc.quoted && s_[i_] == '\\' && i_ + 1 < end) {
        if (PlaceholderAt(i_ + 1)) {
          ++i_;
        } else {
          Copy(2);
        }
      } else {
        Copy(1);
      }
    }
    if (i_ < s_.size()) Copy(1);  // the line break
  }

  void Copy(std::size_t n) {
    n = std::min(n, s_.size() - i_);
    out_.append(s_.substr(i_, n));
    i_ += n;
  }

  std::string_view s_;
  const PlaceholderValue& value_of_;
  std::size_t i_ = 0;
  std::string out_;
  std::vector<Level> levels_{Level{}};
  std::vector<HereDoc> heredocs_;
  bool in_body_ = false;
};

}  // namespace

std::optional<std::size_t> ShellScriptIndex(const std::vector<std::string>& argv) {
  static const std::set<std::string> kShells = {"sh",  "bash", "dash", "zsh",
                                                "ksh", "mksh", "ash",  "busybox"};
  std::size_t i = 0;
  if (i < argv.size() && Basename(argv[i]) == "env") {
    ++i;
    while (i < argv.size() &&
           (argv[i].find('=') != std::string::npos || argv[i].rfind('-', 0) == 0))
      ++i;
  }
  if (i >= argv.size() || !kShells.count(Basename(argv[i]))) return std::nullopt;
  if (Basename(argv[i]) == "busybox") {
    if (++i >= argv.size() || (argv[i] != "sh" && argv[i] != "ash")) return std::nullopt;
  }
  bool dash_c = false;
  for (++i; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--" || a == "-") {
      ++i;
      break;
    }
    if (a.rfind("--", 0) == 0) {
      if (a == "--rcfile" || a == "--init-file") ++i;  // these take a value
      continue;
    }
    if (a.size() < 2 || (a[0] != '-' && a[0] != '+')) break;
    if (a[0] == '-' && a.find('c') != std::string::npos) dash_c = true;
    if (a.find_first_of("oO") != std::string::npos) ++i;  // -o NAME, -O NAME
  }
  if (!dash_c || i >= argv.size()) return std::nullopt;
  return i;
}

std::string ShellWord(std::string_view value) {
  bool plain = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(value);
  std::string out = "'";
  for (char c : value) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string SubstituteInShellScript(std::string_view script, const PlaceholderValue& value_of) {
  return Substituter(script, value_of).Run();
}

}  // namespace headway::hpo::internal
