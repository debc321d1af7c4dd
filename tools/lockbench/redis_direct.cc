// The direct-Redis baseline and the Redis counter (see locker.h).

#include <hiredis/hiredis.h>
#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/redis/keys.h"
#include "backends/redis/scripts.h"
#include "tools/lockbench/locker.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {
namespace {

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextDeleter>;

// The one place hiredis failures become a Status.
absl::Status RedisError(absl::string_view what, const redisContext* c, const redisReply* r) {
  if (c != nullptr && c->err != 0) {
    return absl::UnavailableError(absl::StrCat("redis ", what, ": ", c->errstr));
  }
  if (r == nullptr) return absl::UnavailableError(absl::StrCat("redis ", what, ": no reply"));
  if (r->type == REDIS_REPLY_ERROR) {
    return absl::InternalError(absl::StrCat("redis ", what, ": ", std::string(r->str, r->len)));
  }
  return absl::InternalError(absl::StrCat("redis ", what, ": unexpected reply type ", r->type));
}

absl::StatusOr<Context> Connect(const std::string& address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("not host:port: ", address));
  }
  timeval tv{5, 0};
  Context c(redisConnectWithTimeout(address.substr(0, colon).c_str(), port, tv));
  if (c == nullptr) return absl::ResourceExhaustedError("redis: cannot allocate a context");
  if (c->err != 0) return RedisError(absl::StrCat("connect ", address), c.get(), nullptr);
  return c;
}

absl::StatusOr<Reply> Command(redisContext* c, const std::vector<std::string>& args,
                              absl::string_view what) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  Reply r(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
  if (r == nullptr || r->type == REDIS_REPLY_ERROR) return RedisError(what, c, r.get());
  return r;
}

absl::StatusOr<std::string> LoadScript(redisContext* c, const std::string& script) {
  absl::StatusOr<Reply> r = Command(c, {"SCRIPT", "LOAD", script}, "SCRIPT LOAD");
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_STRING) return RedisError("SCRIPT LOAD", c, r->get());
  return std::string((*r)->str, (*r)->len);
}

int64_t IntElement(const redisReply* r, size_t i) {
  if (r->type != REDIS_REPLY_ARRAY || i >= r->elements) return 0;
  const redisReply* e = r->element[i];
  if (e->type == REDIS_REPLY_INTEGER) return e->integer;
  int64_t v = 0;
  if (e->type == REDIS_REPLY_STRING) (void)absl::SimpleAtoi(absl::string_view(e->str, e->len), &v);
  return v;
}

class RedisCounter final : public Counter {
 public:
  RedisCounter(Context c, std::string key) : c_(std::move(c)), key_(std::move(key)) {}

  absl::StatusOr<int64_t> Get() override {
    absl::StatusOr<Reply> r = Command(c_.get(), {"GET", key_}, "GET counter");
    if (!r.ok()) return r.status();
    if ((*r)->type == REDIS_REPLY_NIL) return 0;
    int64_t v = 0;
    if ((*r)->type != REDIS_REPLY_STRING ||
        !absl::SimpleAtoi(absl::string_view((*r)->str, (*r)->len), &v)) {
      return RedisError("GET counter", c_.get(), r->get());
    }
    return v;
  }

  absl::Status Set(int64_t v) override {
    return Command(c_.get(), {"SET", key_, absl::StrCat(v)}, "SET counter").status();
  }

 private:
  Context c_;
  const std::string key_;
};

// The lockd redis backend keeps fence keys for 24 h after a lease
// (redis.fence_retention's default); the baseline does the same work.
constexpr int64_t kFenceRetentionMs = 24 * 3600 * 1000;

class RedisDirectLocker final : public Locker {
 public:
  RedisDirectLocker(Context cmd, Context sub, std::string acquire_sha, std::string release_sha,
                    std::string key_prefix, std::string ns)
      : cmd_(std::move(cmd)),
        sub_(std::move(sub)),
        acquire_sha_(std::move(acquire_sha)),
        release_sha_(std::move(release_sha)),
        codec_(std::move(key_prefix)),
        ns_(std::move(ns)) {}

  absl::StatusOr<AcquireOutcome> Acquire(const std::string& name, const std::string& owner,
                                         absl::Duration lease, absl::Duration wait) override {
    redis::LockKeys k = codec_.KeysFor(LockKey{ns_, name});
    int64_t lease_ms = absl::ToInt64Milliseconds(lease);
    if (wait > absl::ZeroDuration()) {
      absl::Status s = Subscribe(k.channel);
      if (!s.ok()) return s;
    }
    const int64_t deadline = NowNanos() + absl::ToInt64Nanoseconds(wait);
    // The arguments lockd's redis backend sends for an exclusive acquire
    // (scripts.h), without a place in the queue: callers here wait by the
    // release messages alone, as lockd's did before it kept a queue.
    std::vector<std::string> args = {"EVALSHA",
                                     acquire_sha_,
                                     "5",
                                     k.lock,
                                     k.fence,
                                     k.freed,
                                     k.queue,
                                     k.qlife,
                                     owner,
                                     absl::StrCat(lease_ms),
                                     "",
                                     redis::kMayTakeFree,
                                     absl::StrCat(lease_ms + kFenceRetentionMs),
                                     k.channel,
                                     "X",
                                     "0",
                                     "0",
                                     owner,
                                     /*join=*/"0",
                                     "10000"};
    for (;;) {
      if (wait > absl::ZeroDuration()) {
        // Releases published before this try are answered by the try itself.
        absl::Status s = DrainMessages();
        if (!s.ok()) return s;
      }
      absl::StatusOr<Reply> r = Command(cmd_.get(), args, "acquire script");
      if (!r.ok()) return r.status();
      // Granted: {1, hold_count, token, lease_ms}; not: {0, code, extra,
      // retry_ms, state...}, whose last element is an exclusive holder's PTTL.
      if ((*r)->type != REDIS_REPLY_ARRAY || (*r)->elements < 4) {
        return RedisError("acquire script", cmd_.get(), r->get());
      }
      if (IntElement(r->get(), 0) == 1) {
        return AcquireOutcome{true, static_cast<uint64_t>(IntElement(r->get(), 2))};
      }
      int64_t now = NowNanos();
      if (wait <= absl::ZeroDuration() || now >= deadline) return AcquireOutcome{};
      // Sleep until a release is published or the holder's lease ends.
      int64_t pttl_ms = (*r)->elements > 4 ? IntElement(r->get(), (*r)->elements - 1) : -2;
      int64_t timeout_ms = (deadline - now + 999999) / 1000000;
      if (pttl_ms > 0) timeout_ms = std::min(timeout_ms, pttl_ms);
      if (pttl_ms == -2) timeout_ms = 0;  // freed meanwhile: retry at once
      absl::Status s = WaitMessage(static_cast<int>(std::max<int64_t>(timeout_ms, 0)));
      if (!s.ok()) return s;
    }
  }

  absl::Status Release(const std::string& name, const std::string& owner) override {
    redis::LockKeys k = codec_.KeysFor(LockKey{ns_, name});
    absl::StatusOr<Reply> r =
        Command(cmd_.get(),
                {"EVALSHA", release_sha_, "2", k.lock, k.freed, owner, "", "60000", k.channel, "",
                 /*fencing token: any hold of the owner*/ "0"},
                "release script");
    if (!r.ok()) return r.status();
    int64_t code = IntElement(r->get(), 0);
    if (code < 0) return absl::FailedPreconditionError("release: the owner does not hold the lock");
    return absl::OkStatus();
  }

 private:
  absl::Status Subscribe(const std::string& channel) {
    if (subscribed_.contains(channel)) return absl::OkStatus();
    absl::StatusOr<Reply> r = Command(sub_.get(), {"SUBSCRIBE", channel}, "SUBSCRIBE");
    if (!r.ok()) return r.status();
    subscribed_.insert(channel);
    return absl::OkStatus();
  }

  // Reads and drops every message that has already arrived, without blocking.
  absl::Status DrainMessages() {
    for (;;) {
      void* reply = nullptr;
      if (redisGetReplyFromReader(sub_.get(), &reply) != REDIS_OK) {
        return RedisError("subscriber", sub_.get(), nullptr);
      }
      if (reply != nullptr) {
        freeReplyObject(reply);
        continue;
      }
      pollfd p{sub_->fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return absl::OkStatus();
      if (redisBufferRead(sub_.get()) != REDIS_OK) {
        return RedisError("subscriber", sub_.get(), nullptr);
      }
    }
  }

  // Waits up to `timeout_ms` for one message; OK either way.
  absl::Status WaitMessage(int timeout_ms) {
    const int64_t deadline = NowNanos() + int64_t{timeout_ms} * 1000000;
    for (;;) {
      void* reply = nullptr;
      if (redisGetReplyFromReader(sub_.get(), &reply) != REDIS_OK) {
        return RedisError("subscriber", sub_.get(), nullptr);
      }
      if (reply != nullptr) {
        freeReplyObject(reply);
        return absl::OkStatus();
      }
      int64_t left_ms = (deadline - NowNanos()) / 1000000;
      if (left_ms <= 0) return absl::OkStatus();
      pollfd p{sub_->fd, POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left_ms));
      if (n <= 0) return absl::OkStatus();
      if (redisBufferRead(sub_.get()) != REDIS_OK) {
        return RedisError("subscriber", sub_.get(), nullptr);
      }
    }
  }

  Context cmd_;
  Context sub_;
  const std::string acquire_sha_;
  const std::string release_sha_;
  const redis::KeyCodec codec_;
  const std::string ns_;
  absl::flat_hash_set<std::string> subscribed_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Counter>> NewRedisCounter(const std::string& address,
                                                         const std::string& key) {
  absl::StatusOr<Context> c = Connect(address);
  if (!c.ok()) return c.status();
  return std::make_unique<RedisCounter>(*std::move(c), key);
}

absl::StatusOr<std::unique_ptr<Locker>> NewRedisDirectLocker(const std::string& address,
                                                             const std::string& key_prefix,
                                                             const std::string& ns) {
  absl::Status prefix_ok = redis::ValidateKeyPrefix(key_prefix);
  if (!prefix_ok.ok()) return prefix_ok;
  absl::StatusOr<Context> cmd = Connect(address);
  if (!cmd.ok()) return cmd.status();
  absl::StatusOr<Context> sub = Connect(address);
  if (!sub.ok()) return sub.status();
  absl::StatusOr<std::string> acquire =
      LoadScript(cmd->get(), redis::Prelude(redis::kAcquireScript));
  if (!acquire.ok()) return acquire.status();
  absl::StatusOr<std::string> release =
      LoadScript(cmd->get(), redis::Prelude(redis::kReleaseScript));
  if (!release.ok()) return release.status();
  return std::make_unique<RedisDirectLocker>(*std::move(cmd), *std::move(sub), *std::move(acquire),
                                             *std::move(release), key_prefix, ns);
}

}  // namespace lockd::bench
