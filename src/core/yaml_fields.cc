#include "core/yaml_fields.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <sstream>

namespace headway::yaml_fields {

int LineOf(const YAML::Node& node) { return node.Mark().line + 1; }

Status FieldError(const std::string& field, const YAML::Node& node, std::string message) {
  Status s = InvalidArgument(std::move(message));
  s.WithField(field, node.Mark().line >= 0 ? std::optional<int>(LineOf(node)) : std::nullopt);
  return s;
}

std::string TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "null";
    default:
      return "nothing";
  }
}

bool IsQuoted(const YAML::Node& node) { return node.Tag() == "!"; }

Result<std::string> AsString(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar()) return FieldError(field, node, "must be a string, got " + TypeName(node));
  return node.Scalar();
}

Result<std::int64_t> AsInt(const std::string& field, const YAML::Node& node, std::int64_t min,
                           std::int64_t max) {
  if (!node.IsScalar() || IsQuoted(node)) {
    return FieldError(
        field, node,
        "must be an integer, got " + (node.IsScalar() ? std::string("a string") : TypeName(node)));
  }
  const std::string& text = node.Scalar();
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return FieldError(field, node, "must be an integer, got '" + text + "'");
  }
  if (value < min || value > max) {
    return FieldError(
        field, node,
        "must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + text);
  }
  return value;
}

Result<std::vector<std::string>> AsStringList(const std::string& field, const YAML::Node& node) {
  if (!node.IsSequence())
    return FieldError(field, node, "must be a list of strings, got " + TypeName(node));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    auto item = AsString(field + "[" + std::to_string(i) + "]", node[i]);
    if (!item.ok()) return item.status();
    out.push_back(std::move(item.value()));
  }
  return out;
}

Result<std::map<std::string, std::string>> AsStringMap(const std::string& field,
                                                       const YAML::Node& node) {
  if (node.IsNull()) return std::map<std::string, std::string>{};
  if (!node.IsMap())
    return FieldError(field, node, "must be a map of strings, got " + TypeName(node));
  std::map<std::string, std::string> out;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) return FieldError(field, kv.first, "keys must be strings");
    std::string key = kv.first.Scalar();
    auto value = AsString(field + "." + key, kv.second);
    if (!value.ok()) return value.status();
    out[key] = std::move(value.value());
  }
  return out;
}

// "16Gi", "512Mi", "2G", "100000" (bytes), as Kubernetes writes quantities.
Result<std::int64_t> AsMemory(const std::string& field, const YAML::Node& node) {
  auto text = AsString(field, node);
  if (!text.ok()) return text.status();
  auto bytes = ParseMemoryQuantity(*text);
  if (!bytes) {
    return FieldError(
        field, node,
        "must be a size such as 512Mi, 16Gi or 2G (at least 4Mi), got '" + *text + "'");
  }
  return *bytes;
}

Result<Duration> AsDuration(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar()) return FieldError(field, node, "must be a duration like 90s, 30m or 2h");
  auto d = ParseDuration(node.Scalar());
  if (!d) {
    return FieldError(field, node,
                      "must be a duration like 90s, 30m or 2h, got '" + node.Scalar() + "'");
  }
  return *d;
}

Status ForEachField(const std::string& prefix, const YAML::Node& map,
                    const std::map<std::string, FieldHandler>& handlers) {
  if (!map.IsMap()) {
    return FieldError(prefix.empty() ? "spec" : prefix, map, "must be a map, got " + TypeName(map));
  }
  std::set<std::string> seen;
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(prefix, kv.first, "field names must be strings");
    std::string key = kv.first.Scalar();
    std::string field = prefix.empty() ? key : prefix + "." + key;
    if (!seen.insert(key).second) return FieldError(field, kv.first, "is given twice");
    auto handler = handlers.find(key);
    if (handler == handlers.end()) {
      std::string known;
      for (const auto& [name, unused] : handlers) known += (known.empty() ? "" : ", ") + name;
      return FieldError(field, kv.first, "unknown field (known fields: " + known + ")");
    }
    HEADWAY_RETURN_IF_ERROR(handler->second(field, kv.second));
  }
  return Status::Ok();
}

FieldHandler AssignInt(int& target, std::int64_t min, std::int64_t max) {
  return [&target, min, max](const std::string& field, const YAML::Node& value) -> Status {
    auto parsed = AsInt(field, value, min, max);
    if (!parsed.ok()) return parsed.status();
    target = static_cast<int>(*parsed);
    return Status::Ok();
  };
}

FieldHandler Ignore() {
  return [](const std::string&, const YAML::Node&) { return Status::Ok(); };
}

Result<double> AsDouble(const std::string& field, const YAML::Node& node) {
  if (!node.IsScalar() || IsQuoted(node)) {
    return FieldError(
        field, node,
        "must be a number, got " + (node.IsScalar() ? std::string("a string") : TypeName(node)));
  }
  const std::string& text = node.Scalar();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return FieldError(field, node, "must be a finite number, got '" + text + "'");
  }
  return value;
}

Result<bool> AsBool(const std::string& field, const YAML::Node& node) {
  if (node.IsScalar() && !IsQuoted(node)) {
    if (node.Scalar() == "true") return true;
    if (node.Scalar() == "false") return false;
  }
  return FieldError(field, node, "must be true or false");
}

namespace {

// The offset of the first byte that is not printable text: not part of
// well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF), or a control character other than tab and line breaks
// (C0, DEL, C1), which YAML's printable set excludes and yaml-cpp mangles.
std::optional<std::size_t> FirstNonText(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char c = byte(i);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) return i;
      ++i;
      continue;
    }
    if (c == 0xC2 && i + 1 < text.size() && byte(i + 1) <= 0x9F) return i;  // C1 controls
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0) low = 0xA0;
      if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0) low = 0x90;
      if (c == 0xF4) high = 0x8F;
    } else {
      return i;
    }
    if (i + length > text.size()) return i;
    if (byte(i + 1) < low || byte(i + 1) > high) return i;
    for (std::size_t k = 2; k < length; ++k) {
      if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return i;
    }
    i += length;
  }
  return std::nullopt;
}

// Finds the first scalar (value or key) holding a NUL, which YAML's "\0"
// escape makes: no argv, environment or database text can carry one. It reads
// the parser's events, where an alias is one event: walking the loaded tree
// instead visits an aliased subtree at every use, which a few lines of nested
// aliases turn into billions of visits.
class FirstNulScalar final : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> found;

  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string& value) override {
    if (!found && value.find('\0') != std::string::npos) found = mark;
  }
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

Status NulError(const YAML::Mark& where) {
  Status s = InvalidArgument("a NUL character (\\0) cannot be part of a value or key");
  s.WithField("spec", where.line >= 0 ? std::optional<int>(where.line + 1) : std::nullopt);
  return s;
}

}  // namespace

Result<std::vector<YAML::Node>> LoadAll(std::string_view text, std::size_t max_documents) {
  auto first = Load(text);  // UTF-8 and syntax errors, with their line
  if (!first.ok()) return first.status();
  try {
    std::istringstream stream{std::string(text)};
    YAML::Parser parser(stream);
    FirstNulScalar nul;
    std::size_t documents = 0;
    while (parser.HandleNextDocument(nul)) {
      if (++documents > max_documents) {
        return InvalidArgument("more than " + std::to_string(max_documents) +
                               " YAML documents (or a stream whose documents do not end)");
      }
      if (nul.found) return NulError(*nul.found);
    }
    return YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    Status s = InvalidArgument("not valid YAML or JSON: " + e.msg);
    s.WithField("spec", e.mark.line >= 0 ? std::optional<int>(e.mark.line + 1) : std::nullopt);
    return s;
  }
}

Result<YAML::Node> Load(std::string_view document) {
  // yaml-cpp passes invalid UTF-8 and control bytes through; a spec must be
  // text the API can echo back as JSON.
  if (auto bad = FirstNonText(document)) {
    int line =
        1 + static_cast<int>(std::count(
                document.begin(), document.begin() + static_cast<std::ptrdiff_t>(*bad), '\n'));
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(document[*bad]));
    Status s = InvalidArgument("not UTF-8 text: byte " + std::string(hex) +
                               " is not part of a printable character");
    s.WithField("spec", line);
    return s;
  }
  try {
    std::string text(document);
    YAML::Node root = YAML::Load(text);
    std::istringstream stream{std::move(text)};
    YAML::Parser parser(stream);
    FirstNulScalar nul;
    parser.HandleNextDocument(nul);  // the document YAML::Load read: the first
    if (nul.found) return NulError(*nul.found);
    return root;
  } catch (const YAML::ParserException& e) {
    Status s = InvalidArgument("not valid YAML or JSON: " + e.msg);
    s.WithField("spec", e.mark.line + 1);
    return s;
  }
}

}  // namespace headway::yaml_fields
