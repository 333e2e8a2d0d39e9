// One error model for all of Headway: functions that can fail return a Status
// or a Result<T>. Codes map one-to-one onto HTTP statuses at the API boundary
// (see HttpStatusFor). Nothing here throws; Status values are cheap to copy and
// safe to pass between threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace headway {

enum class StatusCode {
  kOk,
  kInvalidArgument,    // 400: the caller sent something malformed
  kUnauthenticated,    // 401: no or unknown credentials
  kPermissionDenied,   // 403: credentials valid, action not allowed
  kNotFound,           // 404
  kConflict,           // 409: e.g. a name already taken, a state that forbids the action
  kPayloadTooLarge,    // 413
  kResourceExhausted,  // 429: a limit was hit; retry later
  kInternal,           // 500: a broken invariant or an unexpected failure
  kUnavailable,        // 503: a dependency (disk, executor) is down; retry later
};

std::string_view StatusCodeName(StatusCode code);
int HttpStatusFor(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Where in the caller's input the problem is, when it is about a document:
  // a dotted field path ("resources.gpus_per_process") and a 1-based line.
  const std::string& field() const { return field_; }
  std::optional<int> line() const { return line_; }
  Status& WithField(std::string field, std::optional<int> line = std::nullopt) {
    field_ = std::move(field);
    line_ = line;
    return *this;
  }

  // "InvalidArgument: resources.gpus_per_process (line 4): must be >= 0"
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string field_;
  std::optional<int> line_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(value_).ok() && "a Result holding a Status must hold an error");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(value_);
  }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace headway

#define HEADWAY_RETURN_IF_ERROR(expr)        \
  do {                                       \
    ::headway::Status headway_s_ = (expr);   \
    if (!headway_s_.ok()) return headway_s_; \
  } while (0)
