// The pipe between `lockctl verify` and its worker processes: one message
// per line, fields separated by tabs, each field C-escaped (so a field may
// hold tabs, newlines or any byte). The worker asks and the parent answers:
// every line a worker writes gets exactly one line back, so the parent
// handles each worker's requests in order, one at a time (worker.h lists the
// requests, runner.h the answers).
//
// Thread-safety: a LineChannel is used by one thread at a time.

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_WIRE_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_WIRE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lockd::lockctl::verify {

// One line (without its '\n') from `fields`.
std::string EncodeLine(const std::vector<std::string>& fields);
// The fields of a line made by EncodeLine. kInvalidArgument for a field
// that is not validly escaped.
absl::StatusOr<std::vector<std::string>> DecodeLine(absl::string_view line);

// Blocking line I/O on a file descriptor it owns (closed by the destructor).
class LineChannel {
 public:
  explicit LineChannel(int fd) : fd_(fd) {}
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  int fd() const { return fd_; }

  // Writes EncodeLine(fields) and '\n'. kUnavailable if the other end is
  // gone (EPIPE: SIGPIPE must be ignored by the process).
  absl::Status Write(const std::vector<std::string>& fields);
  // The next line's fields. Blocks until a whole line arrives. nullopt at
  // end of file (the other end closed or died) or on a read error; a line
  // that does not decode is also nullopt (the peer is broken).
  std::optional<std::vector<std::string>> Read();
  // Write, then Read.
  std::optional<std::vector<std::string>> Call(const std::vector<std::string>& fields);

 private:
  int fd_;
  std::string buffer_;  // bytes read past the last line returned
};

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_WIRE_H_
