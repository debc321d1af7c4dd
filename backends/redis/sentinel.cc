#include "backends/redis/sentinel.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "util/log.h"

namespace lockd::redis {
namespace {

constexpr absl::string_view kSwitchMaster = "+switch-master";

bool SameEndpoint(const Endpoint& a, const Endpoint& b) {
  return a.host == b.host && a.port == b.port;
}

std::optional<Endpoint> ParseEndpoint(absl::string_view host, absl::string_view port) {
  int p = 0;
  if (host.empty() || !absl::SimpleAtoi(port, &p) || p <= 0 || p > 65535) return std::nullopt;
  return Endpoint{std::string(host), p};
}

std::string SentinelWhere(const Endpoint& e) {
  return absl::StrCat("redis sentinel ", e.host, ":", e.port);
}

}  // namespace

absl::StatusOr<SentinelOptions> SentinelOptionsOf(const RedisOptions& options) {
  if (options.sentinel_master.empty()) {
    return absl::InvalidArgumentError("redis.sentinel_master: must not be empty in sentinel mode");
  }
  if (options.sentinel_master.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError("redis.sentinel_master: must not contain white space");
  }
  if (!options.sentinel_username.empty() && options.sentinel_password.empty()) {
    return absl::InvalidArgumentError(
        "redis.sentinel_username: an ACL user needs a password (redis.sentinel_password or "
        "LOCKD_REDIS_SENTINEL_PASSWORD)");
  }
  return SentinelOptions{options.sentinel_master, options.sentinel_username,
                         options.sentinel_password};
}

absl::StatusOr<std::optional<Endpoint>> ParseMasterAddress(absl::string_view context,
                                                           const redisReply* r) {
  if (r->type == REDIS_REPLY_NIL) return std::nullopt;
  if (r->type == REDIS_REPLY_ERROR) return RedisError(context, nullptr, r);
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
    std::optional<Endpoint> e = ParseEndpoint(ReplyText(r->element[0]), ReplyText(r->element[1]));
    if (e.has_value()) return e;
  }
  return absl::InternalError(absl::StrCat(context, ": malformed reply (expected host and port)"));
}

absl::Status ParseRole(absl::string_view where, const redisReply* r) {
  if (r->type == REDIS_REPLY_ERROR) return RedisError(absl::StrCat(where, ": ROLE"), nullptr, r);
  if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
      r->element[0]->type != REDIS_REPLY_STRING) {
    return absl::InternalError(absl::StrCat(where, ": ROLE: malformed reply"));
  }
  absl::string_view role = ReplyText(r->element[0]);
  if (role == "master") return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(where, ": is a ", role, ", not a primary (a failover is under way?)"));
}

absl::Status CheckPrimary(redisContext* c, absl::string_view where, absl::string_view master_name) {
  ReplyPtr r = Call(c, {"ROLE"});
  std::string context = absl::StrCat(where, " (primary of \"", master_name, "\")");
  if (r == nullptr) return RedisError(absl::StrCat(context, ": ROLE"), c, nullptr);
  return ParseRole(context, r.get());
}

absl::StatusOr<Endpoint> AskSentinelForPrimary(const ConnectionOptions& o,
                                               const Endpoint& sentinel) {
  const SentinelOptions& s = *o.sentinel;
  const std::string where = SentinelWhere(sentinel);
  absl::StatusOr<ContextPtr> c = OpenConnection(o, sentinel, where, s.username, s.password);
  if (!c.ok()) return c.status();
  std::string context = absl::StrCat(where, ": SENTINEL get-master-addr-by-name");
  ReplyPtr r = Call(c->get(), {"SENTINEL", "get-master-addr-by-name", s.master_name});
  if (r == nullptr) return RedisError(context, c->get(), nullptr);
  absl::StatusOr<std::optional<Endpoint>> primary = ParseMasterAddress(context, r.get());
  if (!primary.ok()) return primary.status();
  if (!primary->has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("redis.sentinel_master: ", where,
                                                   " does not know a master set named \"",
                                                   s.master_name, "\""));
  }
  return **primary;
}

std::optional<SwitchMaster> ParseSwitchMaster(absl::string_view message) {
  std::vector<absl::string_view> f = absl::StrSplit(message, ' ', absl::SkipEmpty());
  if (f.size() != 5) return std::nullopt;
  std::optional<Endpoint> from = ParseEndpoint(f[1], f[2]);
  std::optional<Endpoint> to = ParseEndpoint(f[3], f[4]);
  if (!from.has_value() || !to.has_value()) return std::nullopt;
  return SwitchMaster{std::string(f[0]), *std::move(from), *std::move(to)};
}

// --- SentinelWatcher ----------------------------------------------------------

SentinelWatcher::SentinelWatcher(ConnectionOptions options, absl::AnyInvocable<void()> on_moved,
                                 absl::Duration backoff_min, absl::Duration backoff_max,
                                 absl::Duration ping_interval)
    : options_(std::move(options)),
      on_moved_(std::move(on_moved)),
      backoff_min_(backoff_min),
      backoff_max_(backoff_max),
      ping_interval_(ping_interval) {}

SentinelWatcher::~SentinelWatcher() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

absl::Status SentinelWatcher::Start() {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return absl::InternalError("redis sentinel watcher: eventfd failed");
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

bool SentinelWatcher::watching() const {
  absl::MutexLock l(&mu_);
  return watching_;
}

void SentinelWatcher::SetWatching(bool watching) {
  absl::MutexLock l(&mu_);
  watching_ = watching;
}

bool SentinelWatcher::Stopping() const {
  absl::MutexLock l(&mu_);
  return stop_;
}

void SentinelWatcher::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    uint64_t one = 1;
    ssize_t unused = ::write(wake_fd_, &one, sizeof(one));
    (void)unused;  // a full counter already means "wake up"
    thread_.join();
  }
}

bool SentinelWatcher::Sleep(absl::Duration d) {
  pollfd p{wake_fd_, POLLIN, 0};
  ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(d)) + 1);
  return !Stopping();
}

void SentinelWatcher::Run() {
  BlockSigpipeOnThisThread();
  absl::Duration backoff = backoff_min_;
  size_t index = 0;
  while (!Stopping()) {
    const Endpoint& sentinel = options_.addresses[index];
    const absl::Time started = absl::Now();
    absl::Status status = Watch(sentinel);
    const bool was_watching = watching();
    SetWatching(false);
    if (Stopping()) return;
    if (was_watching) {
      LogWarning("redis: lost ", SentinelWhere(sentinel), " (", status.message(),
                 "); watching the next Sentinel");
    }
    index = (index + 1) % options_.addresses.size();
    // Back off unless the connection lasted a while (a Sentinel that accepts
    // and drops every connection must not make this loop spin).
    if (absl::Now() - started < backoff_max_) {
      if (!Sleep(Jitter(backoff))) return;
      backoff = std::min(backoff * 2, backoff_max_);
    } else {
      backoff = backoff_min_;
    }
  }
}

absl::Status SentinelWatcher::Watch(const Endpoint& sentinel) {
  const SentinelOptions& s = *options_.sentinel;
  const std::string where = SentinelWhere(sentinel);
  absl::StatusOr<ContextPtr> opened =
      OpenConnection(options_, sentinel, where, s.username, s.password);
  if (!opened.ok()) return opened.status();
  redisContext* c = opened->get();
  // Asking first catches a failover that ended while no Sentinel was watched.
  std::string context = absl::StrCat(where, ": SENTINEL get-master-addr-by-name");
  ReplyPtr r = Call(c, {"SENTINEL", "get-master-addr-by-name", s.master_name});
  if (r == nullptr) return RedisError(context, c, nullptr);
  absl::StatusOr<std::optional<Endpoint>> primary = ParseMasterAddress(context, r.get());
  if (!primary.ok()) return primary.status();
  if (primary->has_value()) Observe(**primary, false);
  r = Call(c, {"SUBSCRIBE", kSwitchMaster});
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY) {
    return RedisError(absl::StrCat(where, ": SUBSCRIBE"), c, r.get());
  }
  SetWatching(true);
  return Serve(c);
}

absl::Status SentinelWatcher::Serve(redisContext* c) {
  ping_outstanding_ = false;
  absl::Time last_rx = absl::Now();
  absl::Time ping_sent = last_rx;
  while (!Stopping()) {
    absl::Time deadline =
        ping_outstanding_ ? ping_sent + options_.command_timeout : last_rx + ping_interval_;
    int ms = static_cast<int>(
        std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()) + 1));
    pollfd fds[2] = {{c->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = ::poll(fds, 2, ms);
    if (n < 0 && errno != EINTR) return absl::UnavailableError("redis sentinel: poll failed");
    if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      absl::Status status = ReadMessages(c);
      if (!status.ok()) return status;
      last_rx = absl::Now();
    }
    absl::Time now = absl::Now();
    if (ping_outstanding_ && now - ping_sent > options_.command_timeout) {
      return absl::UnavailableError(absl::StrCat("redis sentinel: no answer to PING within ",
                                                 absl::FormatDuration(options_.command_timeout)));
    }
    if (!ping_outstanding_ && now - last_rx >= ping_interval_) {
      redisAppendCommand(c, "PING");
      int done = 0;
      while (done == 0) {
        if (redisBufferWrite(c, &done) != REDIS_OK) return RedisError("redis sentinel", c, nullptr);
      }
      ping_outstanding_ = true;
      ping_sent = now;
    }
  }
  return absl::OkStatus();
}

absl::Status SentinelWatcher::ReadMessages(redisContext* c) {
  if (redisBufferRead(c) != REDIS_OK) return RedisError("redis sentinel", c, nullptr);
  while (true) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(c, &raw) != REDIS_OK) {
      return RedisError("redis sentinel", c, nullptr);
    }
    if (raw == nullptr) return absl::OkStatus();
    ReplyPtr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) return RedisError("redis sentinel", nullptr, r.get());
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
      continue;
    }
    absl::string_view kind = ReplyText(r->element[0]);
    if (kind == "pong") {
      ping_outstanding_ = false;
    } else if (kind == "message" && r->elements == 3 && r->element[2]->type == REDIS_REPLY_STRING) {
      std::optional<SwitchMaster> sw = ParseSwitchMaster(ReplyText(r->element[2]));
      if (sw.has_value() && sw->master_name == options_.sentinel->master_name) {
        Observe(sw->to, true);
      }
    }
  }
}

void SentinelWatcher::Observe(const Endpoint& to, bool announced) {
  bool moved = announced || (primary_.has_value() && !SameEndpoint(*primary_, to));
  primary_ = to;
  if (!moved || Stopping()) return;
  LogInfo("redis: the primary of \"", options_.sentinel->master_name, "\" moved to ", to.host, ":",
          to.port, "; reconnecting");
  on_moved_();
}

}  // namespace lockd::redis
