#include "tests/support/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace lockd::testing {

bool RedisAnswersPing(int port, absl::Duration timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  timeval tv = absl::ToTimeval(timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    static constexpr char kPing[] = "*1\r\n$4\r\nPING\r\n";
    if (::send(fd, kPing, sizeof(kPing) - 1, MSG_NOSIGNAL) == sizeof(kPing) - 1) {
      char buf[64];
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      absl::string_view reply(buf, n > 0 ? static_cast<size_t>(n) : 0);
      // "-LOADING" and the like mean not ready yet.
      ok = absl::StartsWith(reply, "+PONG") || absl::StartsWith(reply, "-NOAUTH");
    }
  }
  ::close(fd);
  return ok;
}

RedisServer::RedisServer(Options options) : options_(std::move(options)) {}

RedisServer::~RedisServer() { Stop(absl::Seconds(5)); }

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(Options options,
                                                                absl::Duration timeout) {
  std::unique_ptr<RedisServer> s(new RedisServer(std::move(options)));
  s->binary_ = FindExecutable({"redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server"});
  if (s->binary_.empty()) return absl::NotFoundError("redis-server is not installed");
  if (s->dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  // A port can be taken between FreePort() and the bind; try a few.
  absl::Status last;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s->port_ = FreePort();
    last = s->Launch(timeout);
    if (last.ok()) return s;
  }
  return last;
}

std::string RedisServer::address() const { return absl::StrCat("127.0.0.1:", port_); }

bool RedisServer::running() const { return process_ != nullptr && process_->Running(); }

std::string RedisServer::Log() const { return ReadFileOrEmpty(absl::StrCat(dir(), "/redis.log")); }

absl::Status RedisServer::Launch(absl::Duration timeout) {
  std::vector<std::string> argv = {binary_,
                                   "--port",
                                   absl::StrCat(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir(),
                                   "--daemonize",
                                   "no",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   options_.persistence ? "yes" : "no",
                                   "--loglevel",
                                   "notice"};
  if (options_.persistence) {
    argv.insert(argv.end(), {"--appendfsync", "always"});
  }
  if (!options_.password.empty()) {
    argv.insert(argv.end(), {"--requirepass", options_.password});
  }
  if (!options_.acl_user.empty()) {
    argv.insert(argv.end(), {"--user", options_.acl_user, "on",
                             absl::StrCat(">", options_.acl_password), "~*", "&*", "+@all"});
  }
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  absl::StatusOr<std::unique_ptr<Subprocess>> p =
      Subprocess::Start(argv, absl::StrCat(dir(), "/redis.log"));
  if (!p.ok()) return p.status();
  process_ = *std::move(p);
  bool up = WaitFor([&] { return !process_->Running() || RedisAnswersPing(port_); }, timeout,
                    absl::Milliseconds(10));
  if (!up || !process_->Running()) {
    process_->Kill();
    process_.reset();
    return absl::UnavailableError(
        absl::StrCat("redis-server did not start on port ", port_, "; its log:\n", Log()));
  }
  return absl::OkStatus();
}

void RedisServer::Stop(absl::Duration grace) {
  if (process_ == nullptr) return;
  Resume();
  process_->Stop(grace);
  process_.reset();
}

void RedisServer::Kill() {
  if (process_ == nullptr) return;
  process_->Kill();
  process_.reset();
}

absl::Status RedisServer::Restart(absl::Duration timeout) {
  Stop();
  return Launch(timeout);
}

void RedisServer::Pause() {
  if (process_ != nullptr) process_->Signal(SIGSTOP);
}

void RedisServer::Resume() {
  if (process_ != nullptr) process_->Signal(SIGCONT);
}

}  // namespace lockd::testing
