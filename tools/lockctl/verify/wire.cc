#include "tools/lockctl/verify/wire.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lockd::lockctl::verify {

std::string EncodeLine(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line.push_back('\t');
    absl::StrAppend(&line, absl::CEscape(fields[i]));
  }
  return line;
}

absl::StatusOr<std::vector<std::string>> DecodeLine(absl::string_view line) {
  std::vector<std::string> fields;
  for (absl::string_view part : absl::StrSplit(line, '\t')) {
    std::string field;
    if (!absl::CUnescape(part, &field)) {
      return absl::InvalidArgumentError(absl::StrCat("bad field \"", part, "\""));
    }
    fields.push_back(std::move(field));
  }
  return fields;
}

LineChannel::~LineChannel() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status LineChannel::Write(const std::vector<std::string>& fields) {
  std::string line = EncodeLine(fields);
  line.push_back('\n');
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("verify pipe closed");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

std::optional<std::vector<std::string>> LineChannel::Read() {
  while (true) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      absl::StatusOr<std::vector<std::string>> fields =
          DecodeLine(absl::string_view(buffer_).substr(0, nl));
      buffer_.erase(0, nl + 1);
      if (!fields.ok()) return std::nullopt;
      return *std::move(fields);
    }
    char chunk[4096];
    ssize_t n = ::read(fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

std::optional<std::vector<std::string>> LineChannel::Call(const std::vector<std::string>& fields) {
  if (!Write(fields).ok()) return std::nullopt;
  return Read();
}

}  // namespace lockd::lockctl::verify
