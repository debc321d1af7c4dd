// The oversell demo: N workers sell from a stock counter kept in Redis with
// read-check-write (GET stock; if > 0: SET stock-1), first without a lock
// and then holding a lockd lock around each sale.
//
// Without the lock two workers read the same value and both sell: more items
// are sold than were in stock. With the lock the sales are serialized and the
// oversell is exactly zero. Each worker uses its own lockd::Client (its own
// owner id), like separate application replicas would: a shared Client would
// share one owner, and lockd locks are reentrant per owner.
//
// The locked write also carries the lease's fencing token and is done by a
// Lua script that refuses a token older than the last one seen: the
// protected resource's own defence against a holder that lost its lease.
//
//   oversell --redis 127.0.0.1:6379 --lockd 127.0.0.1:7411 [--stock 100]
//            [--workers 8] [--think 200us] [--mode both|unlocked|locked]
//
// Prints one line per mode ("... oversold N") and exits 0 when the locked run
// sold exactly the stock, 1 otherwise, 2 on a usage or connection error.

#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "lockd/client.h"

namespace {

struct Options {
  std::string redis = "127.0.0.1:6379";
  std::string lockd = "127.0.0.1:7411";
  int64_t stock = 100;
  int workers = 8;
  absl::Duration think = absl::Microseconds(200);
  std::string mode = "both";
  std::string key = "demo:stock:10001";
};

struct RedisDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using Redis = std::unique_ptr<redisContext, RedisDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Sets *out, or returns an error message.
std::string ConnectRedis(const std::string& address, Redis* out) {
  std::vector<std::string> hp = absl::StrSplit(address, absl::MaxSplits(':', 1));
  int port = 6379;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) {
    return absl::StrCat("--redis must be host:port, not \"", address, "\"");
  }
  timeval tv{5, 0};
  Redis c(redisConnectWithTimeout(hp[0].c_str(), port, tv));
  if (c == nullptr || c->err != 0) {
    return absl::StrCat("cannot connect to Redis at ", address, ": ",
                        c != nullptr ? c->errstr : "out of memory");
  }
  *out = std::move(c);
  return "";
}

Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data())));
}

// Writes `value` to `key` unless a newer fencing token than `token` was seen.
constexpr char kFencedSet[] = R"(
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) < last then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], ARGV[1])
return 1)";

struct Result {
  int64_t sold = 0;
  int64_t stale_writes = 0;  // refused by the fencing check
  int64_t errors = 0;
  int64_t final_stock = 0;
};

// One sale attempt under read-check-write. Returns false when sold out.
bool SellOne(redisContext* r, const Options& o, uint64_t fencing_token, std::atomic<int64_t>* sold,
             std::atomic<int64_t>* stale) {
  Reply get = Command(r, {"GET", o.key});
  if (get == nullptr || get->type != REDIS_REPLY_STRING) return false;
  int64_t n = 0;
  if (!absl::SimpleAtoi(absl::string_view(get->str, get->len), &n) || n <= 0) return false;
  absl::SleepFor(o.think);  // the application's work between check and write
  if (fencing_token == 0) {
    Reply set = Command(r, {"SET", o.key, absl::StrCat(n - 1)});
    if (set == nullptr) return false;
  } else {
    Reply set = Command(r, {"EVAL", kFencedSet, "2", o.key, absl::StrCat(o.key, ":fence"),
                            absl::StrCat(n - 1), absl::StrCat(fencing_token)});
    if (set == nullptr || set->type != REDIS_REPLY_INTEGER) return false;
    if (set->integer == 0) {
      ++*stale;
      return true;
    }
  }
  ++*sold;
  return true;
}

// Runs one mode; returns a result or sets *error.
Result RunMode(const Options& o, bool locked, std::string* error) {
  Result res;
  Redis setup;
  *error = ConnectRedis(o.redis, &setup);
  if (!error->empty()) return res;
  Command(setup.get(), {"SET", o.key, absl::StrCat(o.stock)});
  Command(setup.get(), {"DEL", absl::StrCat(o.key, ":fence")});

  std::atomic<int64_t> sold{0}, stale{0}, errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < o.workers; ++w) {
    threads.emplace_back([&] {
      Redis r;
      if (!ConnectRedis(o.redis, &r).empty()) {
        ++errors;
        return;
      }
      std::unique_ptr<lockd::Client> client;
      if (locked) {
        absl::StatusOr<lockd::Client> c = lockd::Client::Connect(o.lockd);
        if (!c.ok()) {
          ++errors;
          return;
        }
        client = std::make_unique<lockd::Client>(*std::move(c));
      }
      while (true) {
        if (!locked) {
          if (!SellOne(r.get(), o, 0, &sold, &stale)) return;
          continue;
        }
        lockd::AcquireOptions ao;
        ao.ttl = absl::Seconds(10);
        ao.wait = absl::Seconds(30);
        absl::StatusOr<lockd::Lease> lease = client->Acquire(o.key, ao);
        if (!lease.ok()) {
          std::cerr << "oversell: " << lease.status().message() << "\n";
          ++errors;
          return;
        }
        bool more = SellOne(r.get(), o, lease->fencing_token(), &sold, &stale);
        if (!lease->Release().ok()) ++errors;
        if (!more) return;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  res.sold = sold;
  res.stale_writes = stale;
  res.errors = errors;
  Reply left = Command(setup.get(), {"GET", o.key});
  if (left != nullptr && left->type == REDIS_REPLY_STRING &&
      !absl::SimpleAtoi(absl::string_view(left->str, left->len), &res.final_stock)) {
    res.final_stock = -1;  // not a number: reported, and the check fails
  }
  return res;
}

const char kUsage[] =
    "Usage: oversell [--redis HOST:PORT] [--lockd HOST:PORT] [--stock N] [--workers N]\n"
    "                [--think DURATION] [--mode both|unlocked|locked] [--key KEY]\n";

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "oversell: " << flag << " needs a value\n" << kUsage;
      return 2;
    }
    std::string v = argv[++i];
    bool ok = true;
    if (flag == "--redis") {
      o.redis = v;
    } else if (flag == "--lockd") {
      o.lockd = v;
    } else if (flag == "--stock") {
      ok = absl::SimpleAtoi(v, &o.stock) && o.stock > 0;
    } else if (flag == "--workers") {
      ok = absl::SimpleAtoi(v, &o.workers) && o.workers > 0 && o.workers <= 256;
    } else if (flag == "--think") {
      ok = absl::ParseDuration(v, &o.think) && o.think >= absl::ZeroDuration();
    } else if (flag == "--mode") {
      o.mode = v;
      ok = v == "both" || v == "unlocked" || v == "locked";
    } else if (flag == "--key") {
      o.key = v;
    } else {
      ok = false;
    }
    if (!ok) {
      std::cerr << "oversell: bad flag " << flag << " " << v << "\n" << kUsage;
      return 2;
    }
  }

  int rc = 0;
  for (bool locked : {false, true}) {
    if ((locked && o.mode == "unlocked") || (!locked && o.mode == "locked")) continue;
    std::string error;
    absl::Time start = absl::Now();
    Result r = RunMode(o, locked, &error);
    if (!error.empty()) {
      std::cerr << "oversell: " << error << "\n";
      return 2;
    }
    std::cout << (locked ? "with lock:    " : "without lock: ") << o.workers << " workers sold "
              << r.sold << " of " << o.stock << " in stock in "
              << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))
              << ", stock now " << r.final_stock << ", errors " << r.errors
              << (locked ? absl::StrCat(", stale writes refused ", r.stale_writes) : "")
              << " -> oversold " << r.sold - o.stock << "\n";
    if (locked && (r.sold != o.stock || r.final_stock != 0 || r.errors != 0)) rc = 1;
  }
  return rc;
}
