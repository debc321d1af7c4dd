#include "tests/conformance/raw_h2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace lockd::testing {
namespace {

constexpr uint8_t kData = 0x0, kHeaders = 0x1, kRstStream = 0x3, kSettings = 0x4, kPing = 0x6,
                  kWindowUpdate = 0x8, kContinuation = 0x9;
constexpr uint8_t kEndStream = 0x1, kAck = 0x1, kEndHeaders = 0x4;
constexpr uint32_t kCancel = 0x8;

void Put32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

// An HPACK "literal header field without indexing, new name" with plain
// (non-Huffman) strings shorter than 127 bytes.
void Literal(std::string& out, const std::string& name, const std::string& value) {
  out.push_back('\0');
  out.push_back(static_cast<char>(name.size()));
  out += name;
  out.push_back(static_cast<char>(value.size()));
  out += value;
}

bool ReadFull(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, buf, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    buf += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

RawH2Client::~RawH2Client() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RawH2Client::Connect(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return absl::InternalError("socket");
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect ", address, ": ", std::strerror(errno)));
  }
  authority_ = address;
  static constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  if (::write(fd_, kPreface, sizeof(kPreface) - 1) != sizeof(kPreface) - 1) {
    return absl::UnavailableError("writing the HTTP/2 preface");
  }
  WriteFrame(kSettings, 0, 0, "");
  reader_ = std::thread([this] { ReadLoop(); });
  return absl::OkStatus();
}

uint32_t RawH2Client::SendUnary(const std::string& path, const std::string& message) {
  std::string headers;
  Literal(headers, ":method", "POST");
  Literal(headers, ":scheme", "http");
  Literal(headers, ":path", path);
  Literal(headers, ":authority", authority_);
  Literal(headers, "content-type", "application/grpc");
  Literal(headers, "te", "trailers");
  std::string data(1, '\0');  // not compressed
  Put32(data, static_cast<uint32_t>(message.size()));
  data += message;
  // Streams must open in increasing id order: the id is taken and both
  // frames written under write_mu_.
  absl::MutexLock l(&write_mu_);
  uint32_t stream = next_stream_;
  next_stream_ += 2;
  WriteFrame(kHeaders, kEndHeaders, stream, headers);
  WriteFrame(kData, kEndStream, stream, data);
  return stream;
}

void RawH2Client::Reset(uint32_t stream) {
  std::string payload;
  Put32(payload, kCancel);
  WriteFrame(kRstStream, 0, stream, payload);
}

bool RawH2Client::Answered(uint32_t stream) const {
  absl::MutexLock l(&mu_);
  return answered_.contains(stream);
}

void RawH2Client::WriteFrame(uint8_t type, uint8_t flags, uint32_t stream,
                             const std::string& payload) {
  std::string frame;
  uint32_t len = static_cast<uint32_t>(payload.size());
  frame.push_back(static_cast<char>(len >> 16));
  frame.push_back(static_cast<char>(len >> 8));
  frame.push_back(static_cast<char>(len));
  frame.push_back(static_cast<char>(type));
  frame.push_back(static_cast<char>(flags));
  Put32(frame, stream & 0x7fffffffu);
  frame += payload;
  absl::MutexLock l(&mu_);  // one frame at a time on the socket
  const char* p = frame.data();
  size_t n = frame.size();
  while (n > 0) {
    ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if (w < 0 && errno == EINTR) continue;
      return;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void RawH2Client::ReadLoop() {
  char header[9];
  while (ReadFull(fd_, header, sizeof(header))) {
    uint32_t len = (static_cast<uint8_t>(header[0]) << 16) |
                   (static_cast<uint8_t>(header[1]) << 8) | static_cast<uint8_t>(header[2]);
    uint8_t type = static_cast<uint8_t>(header[3]);
    uint8_t flags = static_cast<uint8_t>(header[4]);
    uint32_t stream = ((static_cast<uint8_t>(header[5]) & 0x7f) << 24) |
                      (static_cast<uint8_t>(header[6]) << 16) |
                      (static_cast<uint8_t>(header[7]) << 8) | static_cast<uint8_t>(header[8]);
    std::string payload(len, '\0');
    if (len > 0 && !ReadFull(fd_, payload.data(), len)) return;
    if (stream != 0 && (type == kHeaders || type == kData || type == kContinuation)) {
      absl::MutexLock l(&mu_);
      answered_.insert(stream);
    }
    if (type == kSettings && !(flags & kAck)) {
      WriteFrame(kSettings, kAck, 0, "");
    } else if (type == kPing && !(flags & kAck)) {
      WriteFrame(kPing, kAck, 0, payload);
    } else if (type == kData && len > 0) {
      std::string inc;
      Put32(inc, len);
      WriteFrame(kWindowUpdate, 0, 0, inc);
    }
  }
}

}  // namespace lockd::testing
