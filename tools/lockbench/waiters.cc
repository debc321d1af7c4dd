// The waiters scenario (scenarios.h): W parked Acquires, unary calls or
// many per Session stream.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "protos/proto_duration.h"
#include "tools/lockbench/locker.h"
#include "tools/lockbench/proc_status.h"
#include "tools/lockbench/scenario_util.h"
#include "tools/lockbench/scenarios.h"
#include "tools/lockbench/session_waiters.h"
#include "tools/lockbench/stats.h"

namespace lockd::bench {

namespace {

// One parked Acquire: granted, it releases at once (through the callback
// API, so W waiters need no W threads on this side either).
struct AsyncWaiter {
  grpc::ClientContext acquire_ctx;
  v1::AcquireRequest acquire;
  v1::AcquireResponse acquire_resp;
  grpc::ClientContext release_ctx;
  v1::ReleaseRequest release;
  v1::ReleaseResponse release_resp;
};

// What the waiters' callbacks report, guarded by `mu`.
struct DrainState {
  absl::Mutex mu;
  int64_t target = 0;
  int64_t granted = 0;
  int64_t drained = 0;  // finished, granted or not
  int64_t failed = 0;
  int64_t last_drain_ns = 0;
  absl::Status first_error;

  static bool AllDone(DrainState* s) { return s->drained >= s->target; }

  void Grant() {
    absl::MutexLock l(&mu);
    ++granted;
  }

  // A waiter is done: `ok` if it was granted and released, else `s` says
  // why (OK if it was not granted in time).
  void Finish(bool ok, const absl::Status& s) {
    absl::MutexLock l(&mu);
    ++drained;
    last_drain_ns = NowNanos();
    if (ok) return;
    ++failed;
    if (first_error.ok() && !s.ok()) first_error = s;
  }
  void Finish(bool ok, const grpc::Status& s) {
    Finish(ok, absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message()));
  }
};

}  // namespace

absl::StatusOr<Report> RunWaiters(const CommonOptions& common, const WaitersOptions& options) {
  if (!common.direct_redis.empty()) {
    return absl::InvalidArgumentError("waiters: --direct-redis is not supported");
  }
  absl::StatusOr<Report> report = NewReport(common, "waiters");
  if (!report.ok()) return report;
  const int n = std::max(1, common.clients);
  const int locks = std::max(1, options.locks);
  const int w_total = std::max(0, options.waiters);

  std::vector<std::unique_ptr<v1::LockService::Stub>> stubs;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> ch =
        NewDedicatedChannel(Target(common, i), kConnectTimeout);
    if (!ch.ok()) return ch.status();
    stubs.push_back(v1::LockService::NewStub(*ch));
  }
  // The holder and the observer use client 0's channel.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> holder_ch =
      NewDedicatedChannel(Target(common, 0), kConnectTimeout);
  if (!holder_ch.ok()) return holder_ch.status();
  std::unique_ptr<Locker> holder = NewGrpcLocker(*holder_ch, common.ns);
  auto observer = v1::LockService::NewStub(*holder_ch);
  const std::string holder_owner = Owner(common, "holder", 0);
  auto lock_name = [&](int l) { return absl::StrCat("waiters-", common.run_id, "-", l); };

  for (int l = 0; l < locks; ++l) {
    absl::StatusOr<AcquireOutcome> a =
        holder->Acquire(lock_name(l), holder_owner, options.timeout * 2, absl::ZeroDuration());
    if (!a.ok()) return a.status();
    if (!a->acquired) return absl::InternalError("waiters: the holder could not take a fresh lock");
  }
  ProcSample idle = ReadProc(options.lockd_pid);

  DrainState st;
  st.target = w_total;
  std::vector<std::unique_ptr<AsyncWaiter>> waiters;
  waiters.reserve(static_cast<size_t>(w_total));
  const bool session = common.api == CommonOptions::Api::kSession;
  std::vector<std::string> lock_names;
  for (int l = 0; l < locks; ++l) lock_names.push_back(lock_name(l));
  SessionWaiters sessions(
      SessionWaiters::Options{common.ns, common.lease, options.timeout, std::move(lock_names),
                              w_total, options.per_session},
      SessionWaiters::Callbacks{[&st] { st.Grant(); },
                                [&st](const absl::Status& s) { st.Finish(s.ok(), s); }});
  // Callbacks reference `st` and `waiters`: every early return below first
  // cancels what is outstanding and waits for it.
  auto abandon = [&](absl::Status why) -> absl::Status {
    for (auto& w : waiters) w->acquire_ctx.TryCancel();
    sessions.Cancel();
    absl::MutexLock l(&st.mu);
    if (!st.mu.AwaitWithTimeout(absl::Condition(&DrainState::AllDone, &st), absl::Seconds(60))) {
      std::fprintf(stderr, "lockbench: waiters did not finish after cancellation; aborting\n");
      std::abort();
    }
    return why;
  };

  int64_t park_start = NowNanos();
  if (session) {
    std::vector<v1::LockService::Stub*> raw;
    for (auto& s : stubs) raw.push_back(s.get());
    sessions.Start(raw, [&](int s) { return Owner(common, "ws", s); });
  }
  for (int i = 0; i < (session ? 0 : w_total); ++i) {
    auto w = std::make_unique<AsyncWaiter>();
    AsyncWaiter* wp = w.get();
    v1::LockService::Stub* stub = stubs[static_cast<size_t>(i % n)].get();
    wp->acquire.set_namespace_(common.ns);
    wp->acquire.set_name(lock_name(i % locks));
    wp->acquire.set_owner(Owner(common, "w", i));
    SetProtoDuration(common.lease, wp->acquire.mutable_lease_ttl());
    SetProtoDuration(options.timeout, wp->acquire.mutable_wait_timeout());
    wp->acquire_ctx.set_deadline(absl::ToChronoTime(absl::Now() + options.timeout * 2));
    waiters.push_back(std::move(w));
    stub->async()->Acquire(
        &wp->acquire_ctx, &wp->acquire, &wp->acquire_resp, [&, wp, stub](grpc::Status s) {
          if (!s.ok() || !wp->acquire_resp.acquired()) {
            st.Finish(false, s);
            return;
          }
          st.Grant();
          wp->release.set_namespace_(common.ns);
          wp->release.set_name(wp->acquire.name());
          wp->release.set_owner(wp->acquire.owner());
          wp->release_ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
          stub->async()->Release(&wp->release_ctx, &wp->release, &wp->release_resp,
                                 [&st](grpc::Status rs) { st.Finish(rs.ok(), rs); });
        });
  }

  // Parked once lockd reports every waiter on the locks.
  int64_t seen = 0;
  const int64_t park_deadline = park_start + absl::ToInt64Nanoseconds(options.timeout);
  while (NowNanos() < park_deadline) {
    seen = 0;
    for (int l = 0; l < locks; ++l) {
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      v1::DescribeRequest req;
      req.set_namespace_(common.ns);
      req.set_name(lock_name(l));
      v1::LockInfo info;
      if (observer->Describe(&ctx, req, &info).ok()) seen += info.waiters();
    }
    {
      absl::MutexLock l(&st.mu);
      if (st.drained > 0) break;  // a waiter failed (e.g. RESOURCE_EXHAUSTED)
    }
    if (seen >= w_total) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  int64_t parked_ns = NowNanos();
  // Let lockd settle, then take the highest of a few samples.
  ProcSample parked;
  for (int k = 0; k < 5; ++k) {
    absl::SleepFor(absl::Milliseconds(100));
    parked = MaxOf(parked, ReadProc(options.lockd_pid));
  }

  // Release the locks: each granted waiter releases at once, which grants
  // the next, one by one, until every waiter has been served.
  int64_t drain_start = NowNanos();
  for (int l = 0; l < locks; ++l) {
    absl::Status s = holder->Release(lock_name(l), holder_owner);
    if (!s.ok()) return abandon(s);
  }
  int64_t drain_end = 0;
  int64_t drained = 0;
  {
    absl::MutexLock l(&st.mu);
    st.mu.AwaitWithTimeout(absl::Condition(&DrainState::AllDone, &st), options.timeout);
    drain_end = st.last_drain_ns;
    drained = st.drained;
  }
  if (drained < w_total) {
    return abandon(absl::DeadlineExceededError(
        absl::StrCat("waiters: only ", drained, " of ", w_total, " waiters finished")));
  }
  ProcSample after = ReadProc(options.lockd_pid);

  Report& r = *report;
  int64_t fails, grants;
  absl::Status err;
  {
    absl::MutexLock l(&st.mu);
    fails = st.failed;
    grants = st.granted;
    err = st.first_error;
  }
  r.SetInt("waiters", w_total);
  r.SetInt("locks", locks);
  if (session) r.SetInt("sessions", sessions.sessions());
  r.SetInt("waiters_seen_by_lockd", seen);
  r.Set("park_s", static_cast<double>(parked_ns - park_start) / 1e9);
  if (options.lockd_pid > 0) {
    r.SetInt("lockd_pid", options.lockd_pid);
    r.SetInt("rss_idle_kb", idle.rss_kb);
    r.SetInt("rss_parked_kb", parked.rss_kb);
    r.Set("rss_per_waiter_bytes",
          w_total == 0 ? 0.0 : (parked.rss_kb - idle.rss_kb) * 1024.0 / w_total);
    r.SetInt("threads_idle", idle.threads);
    r.SetInt("threads_parked", parked.threads);
    r.SetInt("threads_after", after.threads);
  }
  r.SetInt("granted", grants);
  r.SetInt("failed", fails);
  if (!err.ok()) r.Set("first_error", err.ToString());
  r.Set("drain_s", static_cast<double>(drain_end - drain_start) / 1e9);
  r.Set("drain_per_s", PerSecond(grants, drain_end - drain_start));
  r.Set("ok", fails == 0 && grants == w_total && seen >= w_total);
  return report;
}

}  // namespace lockd::bench
