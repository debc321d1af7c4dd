// Test helpers for the redis backend's tests (header-only, test code only):
// backend options for tests, a plain hiredis connection to inspect what the
// backend left in Redis, and (from tests/support/sync_backend.h) blocking
// calls into a Backend.

#ifndef LOCKD_TESTS_INTEGRATION_REDIS_REDIS_TEST_UTIL_H_
#define LOCKD_TESTS_INTEGRATION_REDIS_REDIS_TEST_UTIL_H_

#include <hiredis/hiredis.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/backend.h"
#include "backends/redis/redis_backend.h"
#include "backends/redis/redis_client.h"
#include "tests/support/sync_backend.h"

namespace lockd::testing {

// Options for a test's backend: `mode` at `addresses`, keys under `prefix`
// (one per test), two connections, and short timeouts and backoffs so that
// an outage is noticed, and recovered from, quickly.
inline RedisOptions FastRedisOptions(RedisMode mode, std::string addresses, std::string prefix) {
  RedisOptions o;
  o.mode = mode;
  o.addresses = std::move(addresses);
  o.key_prefix = std::move(prefix);
  o.pool_size = 2;
  o.connect_timeout = absl::Milliseconds(500);
  o.command_timeout = absl::Milliseconds(500);
  o.reconnect_backoff_min = absl::Milliseconds(20);
  o.reconnect_backoff_max = absl::Milliseconds(200);
  return o;
}

// A blocking hiredis connection for looking at Redis from a test.
class RedisCli {
 public:
  // Empty `password`: no AUTH.
  static absl::StatusOr<std::unique_ptr<RedisCli>> Connect(int port,
                                                           const std::string& password = "") {
    redis::ConnectionOptions o;
    o.addresses = {redis::Endpoint{"127.0.0.1", port}};
    o.password = password;
    o.command_timeout = absl::Seconds(10);
    size_t next = 0;
    absl::StatusOr<redis::ContextPtr> c = redis::Connect(o, {}, &next);
    if (!c.ok()) return c.status();
    return std::unique_ptr<RedisCli>(new RedisCli(*std::move(c)));
  }

  // Runs one command; null on a connection error.
  redis::ReplyPtr Cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return redis::ReplyPtr(static_cast<redisReply*>(
        redisCommandArgv(c_.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
  }

  // The integer reply (or -999 if the reply is not an integer).
  long long Int(const std::vector<std::string>& args) {
    redis::ReplyPtr r = Cmd(args);
    return r != nullptr && r->type == REDIS_REPLY_INTEGER ? r->integer : -999;
  }

  // The string reply ("<nil>" for nil, "<error: ...>" for errors).
  std::string Str(const std::vector<std::string>& args) {
    redis::ReplyPtr r = Cmd(args);
    if (r == nullptr) return "<connection error>";
    if (r->type == REDIS_REPLY_NIL) return "<nil>";
    if (r->type == REDIS_REPLY_ERROR) return absl::StrCat("<error: ", r->str, ">");
    if (r->type == REDIS_REPLY_INTEGER) return absl::StrCat(r->integer);
    return std::string(r->str, r->len);
  }

  // Every key matching `pattern` (SCAN, so it is safe on a busy server).
  std::vector<std::string> Keys(const std::string& pattern) {
    std::vector<std::string> out;
    std::string cursor = "0";
    do {
      redis::ReplyPtr r = Cmd({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) break;
      cursor.assign(r->element[0]->str, r->element[0]->len);
      for (size_t i = 0; i < r->element[1]->elements; ++i) {
        out.emplace_back(r->element[1]->element[i]->str, r->element[1]->element[i]->len);
      }
    } while (cursor != "0");
    return out;
  }

  // Subscribers of `channel` on the server (PUBSUB NUMSUB).
  long long Subscribers(const std::string& channel) {
    redis::ReplyPtr r = Cmd({"PUBSUB", "NUMSUB", channel});
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
    return r->element[1]->integer;
  }

  // Channels with at least one subscriber matching `pattern`.
  std::vector<std::string> Channels(const std::string& pattern) {
    std::vector<std::string> out;
    redis::ReplyPtr r = Cmd({"PUBSUB", "CHANNELS", pattern});
    if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return out;
    for (size_t i = 0; i < r->elements; ++i)
      out.emplace_back(r->element[i]->str, r->element[i]->len);
    return out;
  }

 private:
  explicit RedisCli(redis::ContextPtr c) : c_(std::move(c)) {}
  redis::ContextPtr c_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_REDIS_REDIS_TEST_UTIL_H_
