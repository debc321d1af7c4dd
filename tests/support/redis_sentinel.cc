#include "tests/support/redis_sentinel.h"

#include <hiredis/hiredis.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/redis/redis_client.h"

namespace lockd::testing {
namespace {

using redis::ReplyPtr;

// One command to 127.0.0.1:port on a fresh connection; null if it fails.
ReplyPtr Query(int port, const std::vector<std::string>& args) {
  redis::ContextPtr c(
      redisConnectWithTimeout("127.0.0.1", port, absl::ToTimeval(absl::Seconds(1))));
  if (c == nullptr || c->err != 0) return nullptr;
  redisSetTimeout(c.get(), absl::ToTimeval(absl::Seconds(2)));
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return ReplyPtr(static_cast<redisReply*>(
      redisCommandArgv(c.get(), static_cast<int>(argv.size()), argv.data(), lens.data())));
}

// The value of `field` in `r`, a flat array of names and values as SENTINEL
// REPLICAS gives per replica ("" if absent).
std::string FieldOf(const redisReply* r, absl::string_view field) {
  if (r->type != REDIS_REPLY_ARRAY) return "";
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    if (redis::ReplyText(r->element[i]) == field) {
      return std::string(redis::ReplyText(r->element[i + 1]));
    }
  }
  return "";
}

// Number of entries of the array reply to `args` on Sentinel `port` (-1 on
// failure).
long long Count(int port, const std::vector<std::string>& args) {
  ReplyPtr r = Query(port, args);
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY) return -1;
  return static_cast<long long>(r->elements);
}

bool IsPrimary(int port) {
  ReplyPtr r = Query(port, {"ROLE"});
  return r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
         redis::ReplyText(r->element[0]) == "master";
}

}  // namespace

RedisSentinelGroup::RedisSentinelGroup(Options options) : options_(std::move(options)) {}

RedisSentinelGroup::~RedisSentinelGroup() {
  for (Sentinel& s : sentinels_) {
    if (s.process != nullptr) s.process->Stop(absl::Seconds(5));
  }
  servers_.clear();
}

absl::StatusOr<std::unique_ptr<RedisSentinelGroup>> RedisSentinelGroup::Start(
    Options options, absl::Duration timeout) {
  std::string binary = FindExecutable({"redis-sentinel", "/usr/bin/redis-sentinel"});
  bool server_binary = false;
  if (binary.empty()) {
    binary = FindExecutable({"redis-server", "/usr/bin/redis-server"});
    server_binary = true;
  }
  if (binary.empty()) return absl::NotFoundError("redis-sentinel is not installed");
  std::unique_ptr<RedisSentinelGroup> g(new RedisSentinelGroup(std::move(options)));
  if (g->dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  absl::StatusOr<std::unique_ptr<RedisServer>> primary = RedisServer::Start();
  if (!primary.ok()) return primary.status();
  g->servers_.push_back(*std::move(primary));
  RedisServer::Options replica_options;
  replica_options.extra_args = {"--replicaof", "127.0.0.1", absl::StrCat(g->primary().port())};
  absl::StatusOr<std::unique_ptr<RedisServer>> replica = RedisServer::Start(replica_options);
  if (!replica.ok()) return replica.status();
  g->servers_.push_back(*std::move(replica));
  for (int i = 0; i < 3; ++i) {
    absl::Status s = g->StartSentinel(i, binary, server_binary);
    if (!s.ok()) return s;
  }
  RedisSentinelGroup* group = g.get();
  bool ready = WaitFor(
      [group] {
        for (int i = 0; i < 3; ++i) {
          if (!group->SentinelReady(i)) return false;
        }
        return true;
      },
      timeout, absl::Milliseconds(100));
  if (!ready) {
    return absl::UnavailableError(absl::StrCat("the Sentinels did not agree within ",
                                               absl::FormatDuration(timeout), "\n", g->Logs()));
  }
  return g;
}

absl::Status RedisSentinelGroup::StartSentinel(int i, const std::string& binary,
                                               bool server_binary) {
  Sentinel s;
  s.dir = absl::StrCat(dir_.path(), "/sentinel", i);
  ::mkdir(s.dir.c_str(), 0700);
  const std::string conf_path = absl::StrCat(s.dir, "/sentinel.conf");
  const std::string& m = options_.master_name;
  for (int attempt = 0; attempt < 3; ++attempt) {
    s.port = FreePort();
    // Sentinel rewrites this file (it must stay writable).
    std::string conf = absl::StrCat(
        "port ", s.port, "\nbind 127.0.0.1\ndaemonize no\nlogfile \"\"\ndir ", s.dir,
        "\nsentinel resolve-hostnames no\nsentinel announce-ip 127.0.0.1\n", "sentinel monitor ", m,
        " 127.0.0.1 ", primary().port(), " 2\n", "sentinel down-after-milliseconds ", m, " ",
        absl::ToInt64Milliseconds(options_.down_after), "\n", "sentinel failover-timeout ", m, " ",
        absl::ToInt64Milliseconds(options_.failover_timeout), "\n", "sentinel parallel-syncs ", m,
        " 1\n");
    absl::Status w = WriteFile(conf_path, conf);
    if (!w.ok()) return w;
    std::vector<std::string> argv = {binary, conf_path};
    if (server_binary) argv.push_back("--sentinel");
    absl::StatusOr<std::unique_ptr<Subprocess>> p =
        Subprocess::Start(argv, absl::StrCat(s.dir, "/sentinel.log"));
    if (!p.ok()) return p.status();
    s.process = *std::move(p);
    Subprocess* proc = s.process.get();
    const int port = s.port;
    if (WaitFor([proc, port] { return !proc->Running() || RedisAnswersPing(port); },
                absl::Seconds(20), absl::Milliseconds(10)) &&
        proc->Running()) {
      sentinels_.push_back(std::move(s));
      return absl::OkStatus();
    }
    s.process->Kill();
  }
  return absl::UnavailableError(
      absl::StrCat("redis-sentinel did not start; its log:\n",
                   ReadFileOrEmpty(absl::StrCat(s.dir, "/sentinel.log"))));
}

bool RedisSentinelGroup::SentinelReady(int i) const {
  const int port = sentinels_[i].port;
  if (PrimaryAccordingTo(i) != servers_[primary_]->address()) return false;
  ReplyPtr r = Query(port, {"SENTINEL", "REPLICAS", options_.master_name});
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 1) return false;
  const redisReply* replica = r->element[0];
  if (FieldOf(replica, "flags") != "slave" || FieldOf(replica, "master-link-status") != "ok") {
    return false;
  }
  return Count(port, {"SENTINEL", "SENTINELS", options_.master_name}) == 2;
}

std::string RedisSentinelGroup::sentinel_addresses() const {
  std::vector<std::string> out;
  for (const Sentinel& s : sentinels_) out.push_back(absl::StrCat("127.0.0.1:", s.port));
  return absl::StrJoin(out, ",");
}

std::string RedisSentinelGroup::PrimaryAccordingTo(int i) const {
  ReplyPtr r =
      Query(sentinels_[i].port, {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return "";
  return absl::StrCat(redis::ReplyText(r->element[0]), ":", redis::ReplyText(r->element[1]));
}

void RedisSentinelGroup::KillPrimary() { primary().Kill(); }

void RedisSentinelGroup::KillSentinel(int i) {
  if (sentinels_[i].process != nullptr) sentinels_[i].process->Kill();
}

absl::Status RedisSentinelGroup::Failover() {
  absl::Status status = absl::UnavailableError("no Sentinel answered SENTINEL FAILOVER");
  // A Sentinel may not yet rate the replica good enough (-NOGOODSLAVE) right
  // after it saw it; that passes.
  WaitFor(
      [&] {
        for (Sentinel& s : sentinels_) {
          if (s.process == nullptr || !s.process->Running()) continue;
          ReplyPtr r = Query(s.port, {"SENTINEL", "FAILOVER", options_.master_name});
          if (r == nullptr) continue;
          if (r->type == REDIS_REPLY_STATUS) {
            status = absl::OkStatus();
            return true;
          }
          status = absl::FailedPreconditionError(
              absl::StrCat("SENTINEL FAILOVER: ", redis::ReplyText(r.get())));
          return !absl::StartsWith(redis::ReplyText(r.get()), "NOGOODSLAVE");
        }
        return false;
      },
      absl::Seconds(10), absl::Milliseconds(200));
  return status;
}

absl::Status RedisSentinelGroup::WaitForPromotion(absl::Duration timeout) {
  const std::string want = replica().address();
  const int port = replica().port();
  bool promoted = WaitFor(
      [&] {
        for (size_t i = 0; i < sentinels_.size(); ++i) {
          if (!sentinels_[i].process->Running()) continue;
          if (PrimaryAccordingTo(static_cast<int>(i)) != want) return false;
        }
        return IsPrimary(port);
      },
      timeout, absl::Milliseconds(50));
  if (!promoted) {
    return absl::DeadlineExceededError(absl::StrCat("the replica was not promoted within ",
                                                    absl::FormatDuration(timeout), "\n", Logs()));
  }
  primary_ = 1 - primary_;
  return absl::OkStatus();
}

std::string RedisSentinelGroup::Logs() const {
  std::string out;
  for (size_t i = 0; i < servers_.size(); ++i) {
    absl::StrAppend(&out, "--- redis ", servers_[i]->address(), ":\n", servers_[i]->Log());
  }
  for (const Sentinel& s : sentinels_) {
    absl::StrAppend(&out, "--- sentinel 127.0.0.1:", s.port, ":\n",
                    ReadFileOrEmpty(absl::StrCat(s.dir, "/sentinel.log")));
  }
  return out;
}

}  // namespace lockd::testing
