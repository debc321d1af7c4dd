#include "backends/redis/redis_client.h"

#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backends/redis/sentinel.h"

namespace lockd::redis {
namespace {

timeval TimevalOf(absl::Duration d) {
  if (d <= absl::ZeroDuration()) d = absl::Milliseconds(1);
  timeval tv = absl::ToTimeval(d);
  return tv;
}

// For Connect() on callers' threads, which may not block SIGPIPE: blocks it
// for the scope and swallows one raised meanwhile.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~ScopedSigpipeBlock() {
    if (sigismember(&old_, SIGPIPE) == 1) return;  // the caller blocks it itself
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      timespec zero{0, 0};
      sigtimedwait(&set, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_;
};

// Redis error replies whose first word says "try again later".
bool IsRetryableErrorCode(absl::string_view code) {
  static constexpr absl::string_view kCodes[] = {
      "LOADING", "BUSY",   "READONLY",  "MASTERDOWN", "TRYAGAIN",   "CLUSTERDOWN", "MOVED",
      "ASK",     "NOAUTH", "WRONGPASS", "OOM",        "NOREPLICAS", "EXECABORT"};
  for (absl::string_view c : kCodes) {
    if (code == c) return true;
  }
  return false;
}

absl::string_view ErrorCode(const redisReply* r) {
  absl::string_view text = ReplyText(r);
  return text.substr(0, text.find(' '));
}

std::string Scrub(absl::string_view text, absl::string_view secret) {
  if (secret.empty()) return std::string(text);
  return absl::StrReplaceAll(text, {{secret, "<redacted>"}});
}

absl::StatusOr<ContextPtr> ConnectOne(const ConnectionOptions& o, const Endpoint& ep,
                                      const std::vector<Script*>& scripts) {
  const std::string where = Where(ep);
  absl::StatusOr<ContextPtr> opened = OpenConnection(o, ep, where, o.username, o.password);
  if (!opened.ok()) return opened.status();
  ContextPtr c = *std::move(opened);
  if (o.db != 0) {
    std::string db = absl::StrCat(o.db);
    ReplyPtr r = Call(c.get(), {"SELECT", db});
    if (r == nullptr) return RedisError(absl::StrCat(where, ": SELECT"), c.get(), nullptr);
    if (r->type == REDIS_REPLY_ERROR) {
      if (ErrorCode(r.get()) == "NOAUTH") {
        return absl::UnauthenticatedError(absl::StrCat(
            where, ": authentication failed: the server requires a password (redis.password)"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("redis.db: ", where, " refused SELECT ", o.db, ": ", ReplyText(r.get())));
    }
  }
  ReplyPtr pong = Call(c.get(), {"PING"});
  if (pong == nullptr) return RedisError(absl::StrCat(where, ": PING"), c.get(), nullptr);
  if (pong->type == REDIS_REPLY_ERROR) {
    if (ErrorCode(pong.get()) == "NOAUTH") {
      return absl::UnauthenticatedError(absl::StrCat(
          where, ": authentication failed: the server requires a password (redis.password)"));
    }
    return RedisError(absl::StrCat(where, ": PING"), c.get(), pong.get());
  }
  if (o.sentinel.has_value()) {
    absl::Status primary = CheckPrimary(c.get(), where, o.sentinel->master_name);
    if (!primary.ok()) return primary;
  }
  for (Script* s : scripts) {
    ReplyPtr r = Call(c.get(), {"SCRIPT", "LOAD", s->body});
    std::string context = absl::StrCat(where, ": SCRIPT LOAD ", s->name);
    if (r == nullptr || r->type == REDIS_REPLY_ERROR) return RedisError(context, c.get(), r.get());
    if (r->type != REDIS_REPLY_STRING) return RedisError(context, c.get(), r.get());
    absl::string_view sha = ReplyText(r.get());
    if (s->sha.empty()) {
      s->sha = std::string(sha);
    } else if (s->sha != sha) {
      return absl::InternalError(absl::StrCat(context, ": unexpected sha ", sha));
    }
  }
  return c;
}

}  // namespace

ReplyPtr Call(redisContext* c, std::initializer_list<absl::string_view> args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (absl::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data())));
}

absl::StatusOr<ContextPtr> OpenConnection(const ConnectionOptions& o, const Endpoint& ep,
                                          absl::string_view where, absl::string_view username,
                                          absl::string_view password) {
  ContextPtr c(redisConnectWithTimeout(ep.host.c_str(), ep.port, TimevalOf(o.connect_timeout)));
  if (c == nullptr) return absl::UnavailableError(absl::StrCat(where, ": cannot allocate"));
  if (c->err != 0) {
    return absl::UnavailableError(absl::StrCat(where, ": cannot connect: ", c->errstr));
  }
  if (redisSetTimeout(c.get(), TimevalOf(o.command_timeout)) != REDIS_OK ||
      redisEnableKeepAlive(c.get()) != REDIS_OK) {
    return absl::UnavailableError(absl::StrCat(where, ": cannot set socket options: ", c->errstr));
  }
  if (!password.empty()) {
    ReplyPtr r = username.empty() ? Call(c.get(), {"AUTH", password})
                                  : Call(c.get(), {"AUTH", username, password});
    if (r == nullptr) return RedisError(absl::StrCat(where, ": AUTH"), c.get(), nullptr);
    if (r->type == REDIS_REPLY_ERROR) {
      return absl::UnauthenticatedError(
          absl::StrCat(where, ": authentication failed: ", Scrub(ReplyText(r.get()), password)));
    }
  }
  return c;
}

absl::string_view ReplyText(const redisReply* r) {
  return r->str == nullptr ? absl::string_view() : absl::string_view(r->str, r->len);
}

std::string Where(const Endpoint& e) { return absl::StrCat("redis ", e.host, ":", e.port); }

// Writes to a socket the server has closed raise SIGPIPE, which would kill
// the process unless it is ignored; hiredis 0.14 uses plain write(2). The
// signal is synchronous (sent to the writing thread), so blocking it on the
// threads that write is enough: the write then fails with EPIPE.
void BlockSigpipeOnThisThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

bool IsNoScript(const redisReply* r) {
  return r->type == REDIS_REPLY_ERROR && ErrorCode(r) == "NOSCRIPT";
}

// " (host:port)" of `c`'s server; empty if unknown.
std::string ServerOf(const redisContext* c) {
  if (c == nullptr || c->tcp.host == nullptr) return "";
  return absl::StrCat(" (", c->tcp.host, ":", c->tcp.port, ")");
}

// "redis timed out (host:port)" and the like: why `c`'s connection failed.
std::string ConnectionFailure(const redisContext* c) {
  std::string why = "connection failed";
  if (c != nullptr && c->err != 0) {
    absl::string_view err(c->errstr);
    if (c->err == REDIS_ERR_IO && (absl::StrContains(err, "temporarily unavailable") ||
                                   absl::StrContains(err, "timed out"))) {
      why = "timed out";
    } else if (c->err == REDIS_ERR_EOF) {
      why = "connection closed by the server";
    } else {
      why = absl::StrCat("connection failed: ", err);
    }
  }
  return absl::StrCat("redis ", why, ServerOf(c));
}

absl::Duration Jitter(absl::Duration d) {
  thread_local absl::BitGen gen;
  return d * absl::Uniform(gen, 0.5, 1.0);
}

absl::Status RedisError(absl::string_view context, const redisContext* c, const redisReply* reply) {
  if (reply == nullptr) {
    return absl::UnavailableError(absl::StrCat(context, ": ", ConnectionFailure(c)));
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    absl::string_view text = ReplyText(reply);
    if (IsRetryableErrorCode(ErrorCode(reply))) {
      return absl::UnavailableError(absl::StrCat(context, ": redis: ", text));
    }
    return absl::InternalError(absl::StrCat(context, ": redis: ", text));
  }
  return absl::InternalError(
      absl::StrCat(context, ": unexpected redis reply (type ", reply->type, ")"));
}

bool IsConnectionError(const redisReply* reply) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR) return false;
  absl::string_view code = ErrorCode(reply);
  return code == "READONLY" || code == "LOADING" || code == "MASTERDOWN" || code == "NOAUTH";
}

absl::StatusOr<std::vector<Endpoint>> ParseAddresses(absl::string_view text) {
  return ParseHostPorts(text, "redis.addresses");
}

absl::StatusOr<ContextPtr> Connect(const ConnectionOptions& options,
                                   const std::vector<Script*>& scripts, size_t* next_address) {
  const size_t n = options.addresses.size();
  if (n == 0) return absl::InvalidArgumentError("redis.addresses: must not be empty");
  ScopedSigpipeBlock no_sigpipe;
  absl::Status first_error;
  for (size_t i = 0; i < n; ++i) {
    size_t index = (*next_address + i) % n;
    const Endpoint& address = options.addresses[index];
    absl::StatusOr<ContextPtr> c;
    if (options.sentinel.has_value()) {
      absl::StatusOr<Endpoint> primary = AskSentinelForPrimary(options, address);
      c = primary.ok() ? ConnectOne(options, *primary, scripts) : primary.status();
    } else {
      c = ConnectOne(options, address, scripts);
    }
    if (c.ok()) {
      *next_address = index;
      return c;
    }
    // Bad credentials or options say more than "the next one is down too".
    if (first_error.ok() || (first_error.code() == absl::StatusCode::kUnavailable &&
                             c.status().code() != absl::StatusCode::kUnavailable)) {
      first_error = c.status();
    }
  }
  return first_error;
}

}  // namespace lockd::redis
