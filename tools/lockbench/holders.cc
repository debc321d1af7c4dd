// The holders scenario (scenarios.h): N Session streams each holding one
// lock, kept open for several leases while the server renews every hold;
// lockd's memory and threads are read from /proc (--lockd-pid).

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "tools/lockbench/locker.h"
#include "tools/lockbench/proc_status.h"
#include "tools/lockbench/scenario_util.h"
#include "tools/lockbench/scenarios.h"
#include "tools/lockbench/session_holders.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {

namespace {

// What the streams' callbacks report.
struct HoldCounts {
  int answered = 0;  // acquires answered
  int acquired = 0;  // of which granted
  int64_t last_answer_ns = 0;
  Samples acquire;  // open + acquire, per stream
  int64_t lost = 0;
  std::string first_lost;
  int ended = 0;
  int ended_ok = 0;
  int ended_early = 0;  // before Close() was asked
  absl::Status first_error;
};

// Thread-safe: the callbacks of SessionHolders fill it.
class HoldState {
 public:
  explicit HoldState(int sessions) : sessions_(sessions) {}

  SessionHolders::Callbacks Callbacks() {
    return SessionHolders::Callbacks{
        [this](int, const absl::Status& s, int64_t nanos) { Answered(s, nanos); },
        [this](int, const v1::LockLost& l) { Lost(l); },
        [this](int, const absl::Status& s) { Ended(s); }};
  }

  // Waits up to `timeout` until every acquire is answered or a stream ended.
  void AwaitAnswered(absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(this, &HoldState::AnsweredOrBroken), timeout);
  }

  // From now on a stream that ends is not an early end.
  void Closing() {
    absl::MutexLock l(&mu_);
    closing_ = true;
  }

  HoldCounts Get() {
    absl::MutexLock l(&mu_);
    return c_;
  }

 private:
  bool AnsweredOrBroken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return c_.answered >= sessions_ || c_.ended > 0;
  }

  void Answered(const absl::Status& s, int64_t nanos) {
    absl::MutexLock l(&mu_);
    ++c_.answered;
    c_.last_answer_ns = NowNanos();
    c_.acquire.Add(nanos);
    if (s.ok()) {
      ++c_.acquired;
    } else if (c_.first_error.ok()) {
      c_.first_error = s;
    }
  }

  void Lost(const v1::LockLost& l) {
    absl::MutexLock lock(&mu_);
    if (c_.lost++ == 0) c_.first_lost = l.ShortDebugString();
  }

  void Ended(const absl::Status& s) {
    absl::MutexLock l(&mu_);
    ++c_.ended;
    if (s.ok()) ++c_.ended_ok;
    if (!closing_) ++c_.ended_early;
    if (c_.first_error.ok() && !s.ok()) c_.first_error = s;
    if (c_.first_error.ok() && !closing_) {
      c_.first_error = absl::UnavailableError("Session: ended before it was closed");
    }
  }

  const int sessions_;
  absl::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  HoldCounts c_ ABSL_GUARDED_BY(mu_);
};

// How many locks of `ns` whose name starts with `prefix` are held (List,
// every page): after the close, none may be.
absl::StatusOr<int64_t> CountHeld(v1::LockService::Stub* stub, const std::string& ns,
                                  const std::string& prefix) {
  int64_t held = 0;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    v1::ListRequest req;
    req.set_namespace_(ns);
    req.set_prefix(prefix);
    req.set_page_size(1000);
    req.set_page_token(token);
    v1::ListResponse resp;
    grpc::Status s = stub->List(&ctx, req, &resp);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("List: ", s.error_message()));
    }
    for (const v1::LockInfo& l : resp.locks()) held += l.held() ? 1 : 0;
    token = resp.next_page_token();
  } while (!token.empty());
  return held;
}

// Locks of the sample checked at the end of the hold (List of every lock
// can take minutes on a backend saturated by the renewals, e.g. ZooKeeper).
constexpr int kHeldSample = 100;

// Describe calls in flight; `left` counts those not answered.
struct PendingDescribes {
  struct Call {
    grpc::ClientContext ctx;
    v1::DescribeRequest req;
    v1::LockInfo info;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  absl::Mutex mu;
  size_t left ABSL_GUARDED_BY(mu) = 0;
  bool AllAnswered() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return left == 0; }
};

// How many of `sample` locks, spread evenly over the n sessions', are held
// by their session's owner (Describe each, all at once: on a backend
// saturated by the renewals, each waits behind them).
absl::StatusOr<int64_t> CountHeldSample(v1::LockService::Stub* stub, const std::string& ns, int n,
                                        int sample, const std::function<std::string(int)>& lock,
                                        const std::function<std::string(int)>& owner) {
  PendingDescribes p;
  std::vector<int> sessions;
  for (int i = 0; i < sample; ++i) {
    sessions.push_back(static_cast<int>(static_cast<int64_t>(i) * n / sample));
    auto c = std::make_unique<PendingDescribes::Call>();
    c->ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    c->req.set_namespace_(ns);
    c->req.set_name(lock(sessions.back()));
    p.calls.push_back(std::move(c));
  }
  {
    absl::MutexLock l(&p.mu);
    p.left = p.calls.size();
  }
  for (auto& c : p.calls) {
    PendingDescribes::Call* call = c.get();
    stub->async()->Describe(&call->ctx, &call->req, &call->info, [&p, call](grpc::Status s) {
      absl::MutexLock l(&p.mu);
      call->status = std::move(s);
      --p.left;
    });
  }
  absl::MutexLock l(&p.mu);
  p.mu.Await(absl::Condition(&p, &PendingDescribes::AllAnswered));  // the deadlines bound it
  int64_t held = 0;
  for (size_t i = 0; i < p.calls.size(); ++i) {
    const PendingDescribes::Call& c = *p.calls[i];
    if (!c.status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(c.status.error_code()),
                          absl::StrCat("Describe: ", c.status.error_message()));
    }
    held += c.info.held() && c.info.owner() == owner(sessions[i]) ? 1 : 0;
  }
  return held;
}

double Mb(int64_t kb) { return kb < 0 ? -1.0 : static_cast<double>(kb) / 1024.0; }

}  // namespace

absl::StatusOr<Report> RunHolders(const CommonOptions& common, const HoldersOptions& options) {
  if (common.api != CommonOptions::Api::kSession || !common.direct_redis.empty()) {
    return absl::InvalidArgumentError("holders: runs over Session streams only (--api=session)");
  }
  const int n = std::max(1, options.sessions);
  const int k = std::max(1, options.channels);
  CommonOptions c = common;
  c.clients = k;
  absl::StatusOr<Report> report = NewReport(c, "holders");
  if (!report.ok()) return report;

  std::vector<std::unique_ptr<v1::LockService::Stub>> stubs;
  std::vector<v1::LockService::Stub*> raw;
  for (int i = 0; i < k; ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(Target(common, i), kConnectTimeout);
    if (!ch.ok()) return ch.status();
    stubs.push_back(v1::LockService::NewStub(*ch));
    raw.push_back(stubs.back().get());
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> observer_ch =
      NewDedicatedChannel(Target(common, 0), kConnectTimeout);
  if (!observer_ch.ok()) return observer_ch.status();
  auto observer = v1::LockService::NewStub(*observer_ch);
  const std::string prefix = absl::StrCat("holders-", common.run_id, "-");
  const std::function<std::string(int)> lock = [&](int s) { return absl::StrCat(prefix, s); };
  const std::function<std::string(int)> owner = [&](int s) { return Owner(common, "holder", s); };

  const ProcSample idle = ReadProc(options.lockd_pid);
  HoldState st(n);
  SessionHolders holders(SessionHolders::Options{common.ns, common.lease, n}, st.Callbacks());
  const int64_t start_ns = NowNanos();
  holders.Start(raw, owner, lock);
  const int64_t started_ns = NowNanos();
  st.AwaitAnswered(options.timeout);
  HoldCounts setup = st.Get();
  const bool all_held = setup.acquired == n && setup.ended == 0;

  // Hold for --hold (only if every stream holds its lock), sampling lockd.
  ProcSample full = ReadProc(options.lockd_pid);
  const int64_t hold_start = NowNanos();
  const int64_t hold_end = hold_start + absl::ToInt64Nanoseconds(options.hold);
  while (all_held && NowNanos() < hold_end && st.Get().ended == 0) {
    absl::SleepFor(std::min(absl::Milliseconds(250), absl::Nanoseconds(hold_end - NowNanos())));
    full = MaxOf(full, ReadProc(options.lockd_pid));
  }
  const int64_t held_ns = NowNanos() - hold_start;
  // Still held after several leases: the renewals kept them.
  const int sample = std::min(n, kHeldSample);
  absl::StatusOr<int64_t> held_at_end =
      CountHeldSample(observer.get(), common.ns, n, sample, lock, owner);

  // Half-close every stream: each must end OK, its hold released.
  st.Closing();
  const int64_t close_start = NowNanos();
  holders.Close();
  const bool all_ended = holders.AwaitEnded(options.timeout);
  const int64_t close_ns = NowNanos() - close_start;
  if (!all_ended) {
    holders.Cancel();
    if (!holders.AwaitEnded(absl::Seconds(60))) {
      std::fprintf(stderr, "lockbench: holders did not end after cancellation; aborting\n");
      std::abort();
    }
  }
  const ProcSample after = ReadProc(options.lockd_pid);
  absl::StatusOr<int64_t> held_after = CountHeld(observer.get(), common.ns, prefix);
  HoldCounts end = st.Get();

  Report& r = *report;
  r.SetInt("sessions", n);
  r.SetInt("channels", k);
  r.Set("hold_ms", absl::ToDoubleMilliseconds(options.hold));
  r.Set("held_ms", static_cast<double>(held_ns) / 1e6);
  // Renewals of each hold the server owes over the hold (one each lease/3);
  // not counted here: a renewal that failed would have pushed `lost`.
  r.Set("renewals_expected", static_cast<double>(held_ns) /
                                 static_cast<double>(absl::ToInt64Nanoseconds(common.lease / 3)));
  r.SetInt("acquired", setup.acquired);
  r.Set("setup_s",
        static_cast<double>((all_held ? setup.last_answer_ns : NowNanos()) - start_ns) / 1e9);
  // How long this process took to start every stream (open + acquire
  // sent): the client's share of setup_s.
  r.Set("start_s", static_cast<double>(started_ns - start_ns) / 1e9);
  AddLatency(r, "acquire", end.acquire);
  r.SetInt("lost", end.lost);
  if (end.lost > 0) r.Set("first_lost", end.first_lost);
  r.SetInt("held_sample", sample);
  r.SetInt("held_at_end_of_hold", held_at_end.ok() ? *held_at_end : -1);
  r.Set("close_s", static_cast<double>(close_ns) / 1e9);
  r.SetInt("ended_ok", end.ended_ok);
  r.SetInt("ended_early", end.ended_early);
  r.SetInt("held_after_close", held_after.ok() ? *held_after : -1);
  if (options.lockd_pid > 0) {
    r.SetInt("lockd_pid", options.lockd_pid);
    r.Set("rss_idle_mb", Mb(idle.rss_kb));
    r.Set("rss_full_mb", Mb(full.rss_kb));
    r.Set("rss_after_mb", Mb(after.rss_kb));
    r.Set("rss_per_session_bytes",
          idle.rss_kb < 0 ? 0.0 : (full.rss_kb - idle.rss_kb) * 1024.0 / n);
    r.SetInt("threads_idle", idle.threads);
    r.SetInt("threads_full", full.threads);
    r.SetInt("threads_after", after.threads);
  }
  absl::Status err = end.first_error;
  if (err.ok() && !held_at_end.ok()) err = held_at_end.status();
  if (err.ok() && !held_after.ok()) err = held_after.status();
  if (err.ok() && !all_ended) err = absl::DeadlineExceededError("holders: streams did not end");
  if (!err.ok()) r.Set("first_error", err.ToString());
  r.Set("ok", all_held && end.lost == 0 && held_at_end.ok() && *held_at_end == sample &&
                  all_ended && end.ended_ok == n && held_after.ok() && *held_after == 0);
  return report;
}

}  // namespace lockd::bench
