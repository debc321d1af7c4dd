#include "tools/lockctl/verify/checker.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lockd::lockctl::verify {
namespace {

// ---------------------------------------------------------------------------
// The history as the checks see it: operations paired, holds, first grants.

struct Acquire {
  const Event* invoke = nullptr;           // lock, kind, owner, ttl, api, replica
  EventType outcome = EventType::kInvoke;  // kInvoke: never completed
  int64_t done_ns = 0;
  uint64_t token = 0;  // of an ok
  // The process's first acquire: its request may have waited for the
  // worker's connection (and session) to open before it left.
  bool first_of_process = false;
  // Acquires of one process in flight together (AcquireAll: one per lock)
  // share a group.
  int64_t group = 0;
};

struct Hold {
  int64_t process = 0;
  std::string owner;
  LockKind kind = LockKind::kExclusive;
  uint32_t permits = 0;
  uint32_t limit = 0;
  uint64_t token = 0;
  Api api = Api::kUnknown;
  int64_t ttl_ns = 0;
  int64_t start_ns = 0;  // the acquire's ok: entering the critical section
  int64_t end_ns = 0;    // leaving it
  // The lease is certainly valid until here: invoke + ttl, or a later bound
  // the worker's client reported on this hold.
  int64_t certain_until_ns = 0;
  int hold_count = 1;
  const Event* ended_by = nullptr;          // the nemesis event that ended it
  std::vector<const Event*> fenced_writes;  // its writes to the fenced counter

  // Fenced writes made after the certain lease ended, and how many of them
  // the fenced counter rejected.
  std::pair<int64_t, int64_t> late_writes() const {
    int64_t late = 0, rejected = 0;
    for (const Event* w : fenced_writes) {
      if (w->time_ns < certain_until_ns) continue;
      ++late;
      if (w->type != EventType::kOk) ++rejected;
    }
    return {late, rejected};
  }

  int64_t certain_end_ns() const { return std::min(end_ns, certain_until_ns); }
  bool certain_at(int64_t t) const { return start_ns <= t && t < certain_end_ns(); }
};

struct Grant {  // a first grant
  int64_t process = 0;
  std::string owner;
  uint64_t token = 0;
  int64_t group = 0;  // its acquire's (Acquire::group)
  int64_t invoke_ns = 0;
  int64_t ok_ns = 0;
};

struct Model {
  std::map<std::string, std::vector<Hold>> holds;    // per lock, by start
  std::map<std::string, std::vector<Grant>> grants;  // per lock, by ok
  std::vector<Acquire> acquires;                     // by invoke
  std::map<std::string, std::vector<const Acquire*>> acquires_by_lock;
  std::vector<const Event*> writes;                         // in the referee's order
  std::map<std::string, int64_t> errors;                    // acquire/release by code
  std::map<int64_t, std::vector<std::string>> group_locks;  // Acquire::group -> its locks
  int64_t nemesis_events = 0;
  int64_t not_acquired = 0;
};

std::string ErrorCode(const Event& e) { return e.error.empty() ? "UNKNOWN" : e.error; }

Model BuildModel(const std::vector<Event>& history) {
  std::vector<const Event*> events;
  events.reserve(history.size());
  for (const Event& e : history) events.push_back(&e);
  std::stable_sort(events.begin(), events.end(),
                   [](const Event* a, const Event* b) { return a->time_ns < b->time_ns; });

  Model m;
  using OpKey = std::tuple<int64_t, Op, std::string>;
  std::map<OpKey, size_t> pending_acquires;  // index in m.acquires
  std::map<OpKey, const Event*> pending_releases;
  std::map<std::pair<int64_t, std::string>, size_t> open;  // (process, lock) -> index in holds
  std::set<int64_t> acquiring_processes;
  std::map<int64_t, int64_t> process_group;  // of the process's acquires in flight
  // A new group unless the process has other acquires in flight (called
  // before its new one is added to pending_acquires).
  auto group_of = [&](int64_t process) {
    auto it = pending_acquires.lower_bound({process, Op::kAcquire, ""});
    const bool alone = it == pending_acquires.end() || std::get<0>(it->first) != process;
    if (alone) process_group[process] = static_cast<int64_t>(m.group_locks.size()) + 1;
    return process_group[process];
  };

  auto extend = [](Hold& h, const Event& e) {
    if (e.valid_until_ns) h.certain_until_ns = std::max(h.certain_until_ns, *e.valid_until_ns);
  };
  auto close = [&](std::map<std::pair<int64_t, std::string>, size_t>::iterator it, int64_t t,
                   const Event* by) {
    Hold& h = m.holds[it->first.second][it->second];
    h.end_ns = t;
    h.ended_by = by;
    return open.erase(it);
  };

  for (const Event* ev : events) {
    const Event& e = *ev;
    if (e.f == Op::kWrite) {
      m.writes.push_back(ev);
      auto o = open.find({e.process, e.lock});
      if (o != open.end() && e.counter == Counter::kFenced) {
        m.holds[e.lock][o->second].fenced_writes.push_back(ev);
      }
      continue;
    }
    if (e.f == Op::kKill || e.f == Op::kAbandon) {
      ++m.nemesis_events;
      for (auto it = open.lower_bound({e.process, ""});
           it != open.end() && it->first.first == e.process;) {
        it = close(it, e.time_ns, ev);
      }
      // Its acquires in flight end here, outcome unknown.
      for (auto it = pending_acquires.lower_bound({e.process, Op::kAcquire, ""});
           it != pending_acquires.end() && std::get<0>(it->first) == e.process;) {
        Acquire& a = m.acquires[it->second];
        a.outcome = EventType::kInfo;
        a.done_ns = e.time_ns;
        it = pending_acquires.erase(it);
      }
      for (auto it = pending_releases.lower_bound({e.process, Op::kAcquire, ""});
           it != pending_releases.end() && std::get<0>(it->first) == e.process;) {
        it = pending_releases.erase(it);
      }
      continue;
    }
    OpKey key{e.process, e.f, e.lock};
    auto hold_key = std::make_pair(e.process, e.lock);
    if (e.f == Op::kAcquire && e.type == EventType::kInvoke) {
      const int64_t group = group_of(e.process);
      pending_acquires[key] = m.acquires.size();
      m.acquires.push_back(Acquire{ev});
      m.acquires.back().first_of_process = acquiring_processes.insert(e.process).second;
      m.acquires.back().group = group;
      m.group_locks[group].push_back(e.lock);
      continue;
    }
    if (e.f == Op::kAcquire) {
      auto p = pending_acquires.find(key);
      if (p == pending_acquires.end()) continue;  // ValidateHistory rejects it
      Acquire& a = m.acquires[p->second];
      pending_acquires.erase(p);
      a.outcome = e.type;
      a.done_ns = e.time_ns;
      a.token = e.token;
      if (e.type != EventType::kOk) {
        if (e.type == EventType::kFail && e.error == "NOT_ACQUIRED") {
          ++m.not_acquired;
        } else {
          ++m.errors[ErrorCode(e)];
        }
        continue;
      }
      const Event& inv = *a.invoke;
      auto o = open.find(hold_key);
      if (o != open.end()) {
        Hold& h = m.holds[e.lock][o->second];
        extend(h, e);
        if (e.token == h.token) {  // reentrant
          ++h.hold_count;
          continue;
        }
        h.token = e.token;  // an upgrade: a new first grant on the same hold
        h.kind = inv.kind;
      } else {
        Hold h;
        h.process = e.process;
        h.owner = inv.owner;
        h.kind = inv.kind;
        h.permits = inv.permits;
        h.limit = inv.limit;
        h.token = e.token;
        h.api = inv.api;
        h.ttl_ns = inv.ttl_ns;
        h.start_ns = e.time_ns;
        h.end_ns = e.time_ns;
        h.certain_until_ns = inv.time_ns + inv.ttl_ns;
        extend(h, e);
        std::vector<Hold>& holds = m.holds[e.lock];
        open[hold_key] = holds.size();
        holds.push_back(std::move(h));
      }
      m.grants[e.lock].push_back(
          Grant{e.process, inv.owner, e.token, a.group, inv.time_ns, e.time_ns});
      continue;
    }
    // Release.
    if (e.type == EventType::kInvoke) {
      pending_releases[key] = ev;
      auto o = open.find(hold_key);
      if (o == open.end()) continue;
      Hold& h = m.holds[e.lock][o->second];
      extend(h, e);
      if (--h.hold_count == 0) close(o, e.time_ns, nullptr);
      continue;
    }
    if (pending_releases.erase(key) == 0) continue;
    if (e.type != EventType::kOk) ++m.errors[ErrorCode(e)];
  }

  int64_t last = events.empty() ? 0 : events.back()->time_ns;
  for (auto it = open.begin(); it != open.end();) it = close(it, last, nullptr);
  for (const Acquire& a : m.acquires) m.acquires_by_lock[a.invoke->lock].push_back(&a);
  return m;
}

// ---------------------------------------------------------------------------
// Reporting helpers.

std::string Secs(int64_t ns) { return absl::StrFormat("%.3fs", static_cast<double>(ns) / 1e9); }

std::string HoldText(const Hold& h) {
  std::string kind;
  if (h.kind == LockKind::kShared) kind = "shared, ";
  if (h.kind == LockKind::kSemaphore) kind = absl::StrCat(h.permits, " permits, ");
  return absl::StrCat("p", h.process, " (", kind, "owner ", h.owner, ", token ", h.token, ") held ",
                      Secs(h.start_ns), "-", Secs(h.end_ns), ", certain until ",
                      Secs(h.certain_until_ns));
}

std::string GrantText(const Grant& g) {
  return absl::StrCat("p", g.process, " (owner ", g.owner, ") got token ", g.token, " at ",
                      Secs(g.ok_ns), " (invoked ", Secs(g.invoke_ns), ")");
}

// Keeps the first examples of each severity; violations are listed before
// what is only worth knowing.
class Examples {
 public:
  explicit Examples(int max) : max_(std::max(max, 0)) {}

  void Add(bool violation, int64_t time_ns, const std::string& lock, std::string text) {
    std::vector<Example>& list = violation ? violations_ : others_;
    if (static_cast<int>(list.size()) < max_) list.push_back({time_ns, lock, std::move(text)});
  }

  std::vector<Example> Take() {
    std::vector<Example> out = std::move(violations_);
    for (Example& e : others_) {
      if (static_cast<int>(out.size()) >= max_) break;
      out.push_back(std::move(e));
    }
    return out;
  }

 private:
  const int max_;
  std::vector<Example> violations_;
  std::vector<Example> others_;
};

int64_t Percentile(std::vector<int64_t>& sorted, int p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

// "2 overlapping certain holds, 1 repeated token": the non-zero ones.
std::string Reasons(const std::vector<std::pair<int64_t, std::string>>& parts) {
  std::vector<std::string> out;
  for (const auto& [n, what] : parts) {
    if (n > 0) out.push_back(absl::StrCat(n, " ", what));
  }
  return absl::StrJoin(out, ", ");
}

void Finish(CheckResult& r, const std::vector<std::pair<int64_t, std::string>>& failures) {
  r.failure = Reasons(failures);
  r.passed = r.failure.empty();
}

// ---------------------------------------------------------------------------
// The checks.

CheckResult Exclusion(const Model& m, const CheckConfig& config) {
  Examples examples(config.max_examples);
  int64_t holds = 0, violations = 0, expired = 0, reader_overlaps = 0, over_limit = 0;
  int64_t max_permits = 0, chances_total = 0, serialized = 0, late = 0, late_rejected = 0;
  for (const auto& [lock, list] : m.holds) {
    holds += static_cast<int64_t>(list.size());
    for (const Hold& h : list) {
      auto [l, r] = h.late_writes();
      late += l;
      late_rejected += r;
    }
    int64_t lock_reader_overlaps = 0;
    std::vector<const Hold*> active;  // holds not yet ended at the current start
    for (const Hold& h : list) {
      const int64_t t = h.start_ns;
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [&](const Hold* a) { return a->end_ns <= t; }),
                   active.end());
      if (h.kind == LockKind::kSemaphore) {
        int64_t certain = h.certain_at(t) ? h.permits : 0;
        int64_t raw = h.permits;
        for (const Hold* a : active) {
          if (a->kind != LockKind::kSemaphore) continue;
          raw += a->permits;
          if (a->certain_at(t)) certain += a->permits;
        }
        max_permits = std::max(max_permits, certain);
        if (raw > h.limit) {
          const bool violation = certain > h.limit;
          (violation ? over_limit : expired) += 1;
          std::vector<std::string> who = {HoldText(h)};
          for (const Hold* a : active) {
            if (a->kind == LockKind::kSemaphore) who.push_back(HoldText(*a));
          }
          examples.Add(violation, t, lock,
                       absl::StrCat(violation ? certain : raw, " permits held at ", Secs(t),
                                    violation ? "" : " counting expired leases", " (limit ",
                                    h.limit, "): ", absl::StrJoin(who, "; ")));
        }
      }
      for (const Hold* a : active) {
        if (a->kind == LockKind::kSemaphore && h.kind == LockKind::kSemaphore) continue;
        if (a->kind == LockKind::kShared && h.kind == LockKind::kShared) {
          ++lock_reader_overlaps;
          continue;
        }
        bool violation = t < std::min(a->certain_end_ns(), h.certain_end_ns());
        (violation ? violations : expired) += 1;
        examples.Add(
            violation, t, lock,
            absl::StrCat(violation ? "overlap inside both certain leases: " : "expired overlap: ",
                         HoldText(*a), "; ", HoldText(h)));
      }
      active.push_back(&h);
    }
    reader_overlaps += lock_reader_overlaps;

    // Chances for readers to overlap: a shared acquire invoked while another
    // process held the lock shared, nobody held it exclusive and no exclusive
    // acquire was waiting. Sweep over (time, delta, kind) points: at one time,
    // ends come before invokes, invokes before starts.
    enum Kind { kSharedHold, kExclusiveHold, kExclusivePending, kSharedInvoke };
    std::vector<std::tuple<int64_t, int, Kind>> points;
    for (const Hold& h : list) {
      Kind k = h.kind == LockKind::kShared ? kSharedHold : kExclusiveHold;
      if (h.kind == LockKind::kSemaphore) continue;
      points.emplace_back(h.start_ns, +1, k);
      points.emplace_back(h.end_ns, -1, k);
    }
    bool any_shared = false;
    for (const Acquire* a : m.acquires_by_lock.at(lock)) {
      if (a->invoke->kind == LockKind::kShared) {
        any_shared = true;
        points.emplace_back(a->invoke->time_ns, 0, kSharedInvoke);
      } else if (a->invoke->kind == LockKind::kExclusive) {
        points.emplace_back(a->invoke->time_ns, +1, kExclusivePending);
        if (a->outcome != EventType::kInvoke) {
          points.emplace_back(a->done_ns, -1, kExclusivePending);
        }
      }
    }
    if (!any_shared) continue;
    std::sort(points.begin(), points.end());
    int64_t counts[3] = {0, 0, 0};
    int64_t chances = 0, first_chance_ns = 0;
    for (const auto& [time, delta, kind] : points) {
      if (kind == kSharedInvoke) {
        // The invoking process holds nothing shared here (one hold per
        // process and lock), so any shared hold is another's.
        if (counts[kSharedHold] > 0 && counts[kExclusiveHold] == 0 &&
            counts[kExclusivePending] == 0) {
          if (chances++ == 0) first_chance_ns = time;
        }
        continue;
      }
      counts[kind] += delta;
    }
    chances_total += chances;
    if (chances >= config.min_reader_chances && lock_reader_overlaps == 0) {
      ++serialized;
      examples.Add(true, first_chance_ns, lock,
                   absl::StrCat("readers never overlapped although ", chances,
                                " shared acquires arrived while only readers held the lock"));
    }
  }
  CheckResult r;
  r.name = "exclusion";
  r.counts = {{"holds", holds},
              {"violations", violations},
              {"expired_overlaps", expired},
              {"late_writes", late},
              {"late_writes_rejected", late_rejected},
              {"reader_overlaps", reader_overlaps},
              {"reader_chances", chances_total},
              {"serialized_reader_locks", serialized},
              {"semaphore_over_limit", over_limit},
              {"max_permits_held", max_permits}};
  r.examples = examples.Take();
  Finish(r, {{violations, "overlaps inside both certain leases"},
             {over_limit, "times a semaphore held more permits than its limit"},
             {expired, "expired overlaps (a holder still inside after its lease ended)"},
             {serialized, "read-write locks whose readers never overlapped"}});
  if (late > 0) {
    r.note = absl::StrCat("holders wrote ", late,
                          " times after their lease ended; fencing rejected ", late_rejected,
                          " of those writes (see lost-updates for what the unfenced counter lost)");
  }
  return r;
}

CheckResult Fencing(const Model& m, const CheckConfig& config) {
  Examples examples(config.max_examples);
  int64_t first_grants = 0, repeated = 0, regressions = 0;
  for (const auto& [lock, grants] : m.grants) {
    first_grants += static_cast<int64_t>(grants.size());
    std::map<uint64_t, const Grant*> seen;
    for (const Grant& g : grants) {
      auto [it, added] = seen.emplace(g.token, &g);
      if (added) continue;
      ++repeated;
      examples.Add(true, g.ok_ns, lock,
                   absl::StrCat("token ", g.token, " granted twice: ", GrantText(*it->second), "; ",
                                GrantText(g)));
    }
    // A grant invoked after another's ok must carry a larger token.
    std::vector<const Grant*> by_invoke;
    for (const Grant& g : grants) by_invoke.push_back(&g);
    std::stable_sort(by_invoke.begin(), by_invoke.end(),
                     [](const Grant* a, const Grant* b) { return a->invoke_ns < b->invoke_ns; });
    size_t next = 0;  // grants (by ok) before it are done before the current invoke
    const Grant* largest = nullptr;
    for (const Grant* g : by_invoke) {
      for (; next < grants.size() && grants[next].ok_ns < g->invoke_ns; ++next) {
        if (largest == nullptr || grants[next].token > largest->token) largest = &grants[next];
      }
      if (largest == nullptr || g->token >= largest->token) continue;
      ++regressions;
      examples.Add(
          true, g->ok_ns, lock,
          absl::StrCat("token went back: ", GrantText(*g), " after ", GrantText(*largest)));
    }
  }

  int64_t accepted = 0, rejected = 0, stale_accepted = 0;
  std::map<std::string, const Event*> largest_accepted;  // per lock
  for (const Event* w : m.writes) {
    if (w->counter != Counter::kFenced) continue;
    if (w->type != EventType::kOk) {
      ++rejected;
      continue;
    }
    ++accepted;
    const Event*& top = largest_accepted[w->lock];
    if (top != nullptr && w->token < top->token) {
      ++stale_accepted;
      examples.Add(true, w->time_ns, w->lock,
                   absl::StrCat("stale write accepted: p", w->process, " wrote with token ",
                                w->token, " at ", Secs(w->time_ns), " after p", top->process,
                                "'s write with token ", top->token, " at ", Secs(top->time_ns)));
    }
    if (top == nullptr || w->token > top->token) top = w;
  }

  CheckResult r;
  r.name = "fencing";
  r.counts = {{"first_grants", first_grants},      {"repeated_tokens", repeated},
              {"token_regressions", regressions},  {"fenced_writes_accepted", accepted},
              {"stale_writes_rejected", rejected}, {"stale_writes_accepted", stale_accepted}};
  r.examples = examples.Take();
  Finish(r, {{repeated, "repeated tokens"},
             {regressions, "tokens smaller than one granted before"},
             {stale_accepted, "stale writes accepted"}});
  return r;
}

CheckResult LostUpdates(const Model& m, const CheckConfig& config) {
  Examples examples(config.max_examples);
  struct Tally {
    int64_t writes = 0, lost = 0, inconsistent = 0;
  };
  struct Replay {
    int64_t value = 0;     // counters start at 0
    int64_t expected = 0;  // what the accepted writes added
  };
  Tally fenced, unfenced;
  std::map<std::pair<std::string, Counter>, Replay> counters;
  for (const Event* w : m.writes) {
    if (w->type != EventType::kOk) continue;
    const bool is_fenced = w->counter == Counter::kFenced;
    Tally& t = is_fenced ? fenced : unfenced;
    Replay& c = counters[{w->lock, w->counter}];
    ++t.writes;
    c.expected += w->wrote - w->read;
    if (w->read < c.value) {
      examples.Add(
          is_fenced, w->time_ns, w->lock,
          absl::StrCat(CounterName(w->counter), " counter: p", w->process, " (token ", w->token,
                       ") wrote ", w->wrote, " at ", Secs(w->time_ns), " having read ", w->read,
                       " while it stood at ", c.value, ": ", c.value - w->read, " updates lost"));
    } else if (w->read > c.value) {
      // A value the counter no longer held: overwritten by a late write
      // after this worker read it (the unfenced counter), or a broken referee.
      ++t.inconsistent;
      examples.Add(is_fenced, w->time_ns, w->lock,
                   absl::StrCat(CounterName(w->counter), " counter: p", w->process, " wrote ",
                                w->wrote, " having read ", w->read,
                                ", which the counter no longer held (it stood at ", c.value, ")"));
    }
    c.value = w->wrote;
  }
  // What was lost is what the accepted writes added and the counter does not
  // show (a later write that read a value since overwritten may restore some).
  for (const auto& [key, c] : counters) {
    Tally& t = key.second == Counter::kFenced ? fenced : unfenced;
    t.lost += std::max<int64_t>(0, c.expected - c.value);
  }
  CheckResult r;
  r.name = "lost-updates";
  r.counts = {{"fenced_writes", fenced.writes},
              {"fenced_lost", fenced.lost},
              {"fenced_inconsistent", fenced.inconsistent},
              {"unfenced_writes", unfenced.writes},
              {"unfenced_lost", unfenced.lost},
              {"unfenced_inconsistent", unfenced.inconsistent}};
  r.examples = examples.Take();
  Finish(r, {{fenced.lost, "updates of the fenced counter lost"},
             {fenced.inconsistent,
              "writes to the fenced counter based on a value it no longer held"}});
  if (unfenced.lost > 0) {
    r.note = absl::StrCat("the unfenced counter lost ", unfenced.lost,
                          " updates: what fencing prevented");
  }
  return r;
}

// The first grant of `lock` after `t`, or null.
const Grant* NextGrant(const Model& m, const std::string& lock, int64_t t) {
  const std::vector<Grant>& grants = m.grants.at(lock);
  auto next = std::upper_bound(grants.begin(), grants.end(), t,
                               [](int64_t time, const Grant& g) { return time < g.ok_ns; });
  return next == grants.end() ? nullptr : &*next;
}

// Whether `next`, the first grant of `lock` after a strike at `t`, also took
// (AcquireAll) another lock whose holder was struck later than t and which
// it was the first grant of since: its wait then measures that strike.
bool MeasuresALaterStrike(const Model& m, const std::string& lock, int64_t t, const Grant& next) {
  for (const std::string& other : m.group_locks.at(next.group)) {
    if (other == lock) continue;
    for (const Hold& k : m.holds.at(other)) {
      if (k.ended_by == nullptr || k.end_ns <= t || k.end_ns >= next.ok_ns) continue;
      const Grant* after = NextGrant(m, other, k.end_ns);
      if (after != nullptr && after->group == next.group) return true;
    }
  }
  return false;
}

CheckResult Liveness(const Model& m, const CheckConfig& config) {
  Examples examples(config.max_examples);
  int64_t ended = 0, unmeasured = 0, over = 0, shadowed = 0;
  std::vector<int64_t> delays;
  for (const auto& [lock, list] : m.holds) {
    for (const Hold& h : list) {
      if (h.ended_by == nullptr) continue;
      ++ended;
      const int64_t t = h.end_ns;
      const Grant* next = NextGrant(m, lock, t);
      if (next == nullptr) {
        ++unmeasured;
        continue;
      }
      if (MeasuresALaterStrike(m, lock, t, *next)) {
        ++shadowed;
        continue;
      }
      const int64_t delay = next->ok_ns - t;
      delays.push_back(delay);
      const absl::Duration bound = h.api == Api::kSession
                                       ? config.session_liveness_bound
                                       : absl::Nanoseconds(h.ttl_ns) + config.unary_liveness_grace;
      if (absl::Nanoseconds(delay) <= bound) continue;
      ++over;
      examples.Add(true, next->ok_ns, lock,
                   absl::StrCat(OpName(h.ended_by->f), " of ", HoldText(h), " at ", Secs(t),
                                ": next grant ", Secs(delay), " later (bound ",
                                absl::FormatDuration(bound), "), ", GrantText(*next)));
    }
  }
  std::sort(delays.begin(), delays.end());
  CheckResult r;
  r.name = "liveness";
  r.counts = {{"nemesis_events", m.nemesis_events},
              {"holds_ended", ended},
              {"measured", static_cast<int64_t>(delays.size())},
              {"unmeasured", unmeasured},
              {"shadowed", shadowed},
              {"over_bound", over},
              {"regrant_p50_ns", Percentile(delays, 50)},
              {"regrant_max_ns", delays.empty() ? 0 : delays.back()}};
  r.examples = examples.Take();
  Finish(r, {{over, "locks granted again later than the bound after their holder died"}});
  return r;
}

CheckResult Fairness(const Model& m, const CheckConfig& config) {
  Examples examples(config.max_examples);
  std::vector<int64_t> waits;
  std::map<std::pair<std::string, std::string>, std::vector<const Acquire*>> queues;
  for (const Acquire& a : m.acquires) {
    if (a.outcome != EventType::kOk) continue;
    waits.push_back(a.done_ns - a.invoke->time_ns);
    if (!a.invoke->replica.empty()) queues[{a.invoke->lock, a.invoke->replica}].push_back(&a);
  }
  const int64_t slack = absl::ToInt64Nanoseconds(config.fifo_slack);
  int64_t compared = 0, violations = 0;
  for (const auto& [key, queue] : queues) {  // each in invoke order
    compared += static_cast<int64_t>(queue.size());
    std::vector<const Acquire*> waiting;  // earlier acquires not yet granted
    for (const Acquire* b : queue) {
      const int64_t b_invoke = b->invoke->time_ns;
      waiting.erase(std::remove_if(waiting.begin(), waiting.end(),
                                   [&](const Acquire* a) { return a->done_ns <= b_invoke; }),
                    waiting.end());
      for (const Acquire* a : waiting) {
        // A first acquire may have reached the replica long after its stamp.
        if (a->first_of_process) continue;
        // Who was granted first is told by the tokens, not by the ok stamps:
        // a worker reports its grant after its client's own work (a unary
        // client renews a lease it waited for before it returns), so two
        // grants that hold together (readers, permits) may be stamped in
        // either order.
        if (a->invoke->time_ns + slack >= b_invoke || b->token >= a->token) continue;
        ++violations;
        examples.Add(
            true, b->done_ns, key.first,
            absl::StrCat("on ", key.second, ": p", b->invoke->process, " invoked at ",
                         Secs(b_invoke), " was granted token ", b->token, " (at ", Secs(b->done_ns),
                         ") before p", a->invoke->process, " invoked at ", Secs(a->invoke->time_ns),
                         " (token ", a->token, " at ", Secs(a->done_ns), ")"));
      }
      waiting.push_back(b);
    }
  }
  std::sort(waits.begin(), waits.end());
  CheckResult r;
  r.name = "fairness";
  r.counts = {{"acquires", static_cast<int64_t>(m.acquires.size())},
              {"granted", static_cast<int64_t>(waits.size())},
              {"not_acquired", m.not_acquired},
              {"wait_p50_ns", Percentile(waits, 50)},
              {"wait_p90_ns", Percentile(waits, 90)},
              {"wait_p99_ns", Percentile(waits, 99)},
              {"wait_max_ns", waits.empty() ? 0 : waits.back()},
              {"fifo_compared", compared},
              {"fifo_violations", violations}};
  for (const auto& [code, n] : m.errors) r.counts.emplace_back("errors_" + code, n);
  r.examples = examples.Take();
  Finish(r, {{violations, "waiters of one replica granted out of arrival order"}});
  return r;
}

std::string CountText(const std::string& name, int64_t value) {
  if (!absl::EndsWith(name, "_ns")) return absl::StrCat(name, "=", value);
  std::string shown = name.substr(0, name.size() - 3);
  if (value < 1'000'000'000) {
    return absl::StrFormat("%s=%.1fms", shown, static_cast<double>(value) / 1e6);
  }
  return absl::StrCat(shown, "=", Secs(value));
}

}  // namespace

int64_t CheckResult::Count(absl::string_view count_name) const {
  for (const auto& [name, value] : counts) {
    if (name == count_name) return value;
  }
  return 0;
}

bool CheckReport::passed() const {
  for (const CheckResult& c : checks) {
    if (!c.passed) return false;
  }
  return true;
}

const CheckResult* CheckReport::Find(absl::string_view name) const {
  for (const CheckResult& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

CheckReport Check(const std::vector<Event>& events, const CheckConfig& config) {
  const Model m = BuildModel(events);
  CheckReport report;
  report.checks = {Exclusion(m, config), Fencing(m, config), LostUpdates(m, config),
                   Liveness(m, config), Fairness(m, config)};
  return report;
}

void PrintReportText(const CheckReport& report, std::ostream& out) {
  std::vector<std::string> failed;
  for (const CheckResult& c : report.checks) {
    std::vector<std::string> counts;
    for (const auto& [name, value] : c.counts) counts.push_back(CountText(name, value));
    out << absl::StrFormat("%-13s %s  %s\n", c.name, c.passed ? "PASS" : "FAIL",
                           absl::StrJoin(counts, " "));
    if (!c.passed) {
      out << "    failed: " << c.failure << "\n";
      failed.push_back(c.name);
    }
    if (!c.note.empty()) out << "    note: " << c.note << "\n";
    for (const Example& e : c.examples) {
      out << "    at " << Secs(e.time_ns) << " lock " << JsonString(e.lock) << ": " << e.text
          << "\n";
    }
  }
  if (failed.empty()) {
    out << "verify: PASSED\n";
  } else {
    out << "verify: FAILED (" << absl::StrJoin(failed, ", ") << ")\n";
  }
}

void PrintReportJson(const CheckReport& report, std::ostream& out) {
  out << "{\"passed\":" << (report.passed() ? "true" : "false") << ",\"checks\":[";
  bool first_check = true;
  for (const CheckResult& c : report.checks) {
    out << (first_check ? "" : ",") << "{\"name\":" << JsonString(c.name)
        << ",\"passed\":" << (c.passed ? "true" : "false")
        << ",\"failure\":" << JsonString(c.failure) << ",\"note\":" << JsonString(c.note)
        << ",\"counts\":{";
    first_check = false;
    bool first = true;
    for (const auto& [name, value] : c.counts) {
      out << (first ? "" : ",") << JsonString(name) << ":" << value;
      first = false;
    }
    out << "},\"examples\":[";
    first = true;
    for (const Example& e : c.examples) {
      out << (first ? "" : ",") << "{\"time_ns\":" << e.time_ns
          << ",\"lock\":" << JsonString(e.lock) << ",\"text\":" << JsonString(e.text) << "}";
      first = false;
    }
    out << "]}";
  }
  out << "]}\n";
}

int ExitCodeFor(const CheckReport& report) {
  return report.passed() ? kVerifyPassed : kVerifyFailed;
}

int RunVerifyCheck(const std::string& path, ReportFormat format, std::ostream& out,
                   std::ostream& err, const CheckConfig& config) {
  absl::StatusOr<std::vector<Event>> events = ReadHistoryFile(path);
  if (!events.ok()) {
    err << "lockctl verify: " << events.status().message() << "\n";
    return kVerifyUsage;
  }
  CheckReport report = Check(*events, config);
  if (format == ReportFormat::kJson) {
    PrintReportJson(report, out);
  } else {
    PrintReportText(report, out);
  }
  return ExitCodeFor(report);
}

}  // namespace lockd::lockctl::verify
