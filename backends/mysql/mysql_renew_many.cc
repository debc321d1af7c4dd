#include "backends/mysql/mysql_renew_many.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backends/common/errors.h"
#include "backends/mysql/mysql_client.h"

namespace lockd::mysql {
namespace {

using Results = std::vector<absl::StatusOr<RenewResult>>;

// A lock row as one SELECT saw it.
struct Row {
  std::string owner;
  uint64_t token = 0;
  bool live = false;     // expires_at > NOW(6)
  bool holders = false;  // kind <> 0: the holders are <p>holders rows
};
using Rows = absl::flat_hash_map<LockKey, Row>;

std::string KeyPair(const LockKey& k) {
  return absl::StrCat("(", SqlBytes(k.ns), ",", SqlBytes(k.name), ")");
}

// The rows of `keys` (absent keys have no row). Both SELECTs use the primary
// key: MariaDB turns (ns, name) IN (...) into one range per pair.
absl::StatusOr<Rows> ReadRows(Connection& s, const MysqlSchema& schema,
                              const std::vector<LockKey>& keys, absl::string_view context) {
  std::string sql = absl::StrCat("SELECT ns, name, owner, token, expires_at > NOW(6), kind FROM ",
                                 schema.locks(), " WHERE (ns, name) IN (");
  for (size_t i = 0; i < keys.size(); ++i) {
    absl::StrAppend(&sql, i == 0 ? "" : ",", KeyPair(keys[i]));
  }
  sql += ")";
  absl::StatusOr<MysqlResult> r = s.Run(sql, context, Connection::kRead);
  if (!r.ok()) return UnavailableUnlessBug(r.status());
  Rows rows;
  for (const MysqlRow& row : r->rows) {
    Row out;
    int64_t live, kind;
    if (row.size() != 6 || !row[0].has_value() || !row[1].has_value() || !row[2].has_value() ||
        !ParseField(row, 3, &out.token) || !ParseField(row, 4, &live) ||
        !ParseField(row, 5, &kind)) {
      return Unexpected("renew", keys.front());
    }
    out.owner = *row[2];
    out.live = live != 0;
    out.holders = kind != 0;
    rows.insert_or_assign(LockKey{*row[0], *row[1]}, std::move(out));
  }
  return rows;
}

// True if `row` is a live holding that `p` renews: the owner's, with p's
// token unless that is 0.
bool Renews(const RenewParams& p, const Row* row) {
  return row != nullptr && row->live && row->owner == p.owner &&
         (p.fencing_token == 0 || row->token == p.fencing_token);
}

// What the renew procedure answers `p` when `row` is not (or no longer) the
// holding it renews: another owner's live lease, the owner's with another
// token, or none.
absl::Status NotRenewed(const RenewParams& p, const Row* row) {
  if (row != nullptr && row->live) {
    return row->owner != p.owner ? HeldByOtherError(p.key) : OtherHoldError(p.key);
  }
  return LockFreeError(p.key);
}

const Row* Find(const Rows& rows, const LockKey& key) {
  auto it = rows.find(key);
  return it == rows.end() ? nullptr : &it->second;
}

std::string Context(const std::vector<const RenewParams*>& params, absl::Span<const size_t> idx) {
  const LockKey& first = params[idx.front()]->key;
  if (idx.size() == 1) return absl::StrCat("renew of lock ", LockName(first));
  return absl::StrCat("renew of ", idx.size(), " locks (the first ", LockName(first), ")");
}

// Extends by `ttl_us` from now the leases of `expect` still live with the
// same owner and token.
std::string UpdateSql(const MysqlSchema& schema, int64_t ttl_us,
                      const absl::flat_hash_map<LockKey, const Row*>& expect) {
  std::string sql = absl::StrCat("UPDATE ", schema.locks(),
                                 " SET expires_at = TIMESTAMPADD(MICROSECOND, ", ttl_us,
                                 ", NOW(6)) WHERE expires_at > NOW(6) AND"
                                 " (ns, name, owner, token) IN (");
  bool first = true;
  for (const auto& [key, row] : expect) {
    absl::StrAppend(&sql, first ? "" : ",", "(", SqlBytes(key.ns), ",", SqlBytes(key.name), ",",
                    SqlBytes(row->owner), ",", row->token, ")");
    first = false;
  }
  sql += ")";
  return sql;
}

// Renews params[i] for i in `idx` (all with ttl `ttl_us`; at most
// kRenewChunk) into out[i].
//
// The SELECT names each hold's holding by its fencing token, and the UPDATE
// extends only leases still live with that owner and token: a token is never
// granted twice, so a holding that ended between the two statements is not
// revived, and the token each answer carries is the holding's whose lease
// was extended.
void RenewChunk(Connection& s, const MysqlSchema& schema,
                const std::vector<const RenewParams*>& params, absl::Span<const size_t> idx,
                int64_t ttl_us, Results& out) {
  const std::string context = Context(params, idx);
  std::vector<LockKey> keys;
  {
    absl::flat_hash_map<LockKey, bool> seen;
    for (size_t i : idx) {
      if (seen.emplace(params[i]->key, true).second) keys.push_back(params[i]->key);
    }
  }
  absl::StatusOr<Rows> rows = ReadRows(s, schema, keys, context);
  if (!rows.ok()) {
    for (size_t i : idx) out[i] = rows.status();
    return;
  }
  // The holds the owner held at the SELECT, and the rows the UPDATE is to
  // match (one per key: a live lease has one owner).
  std::vector<size_t> held;
  absl::flat_hash_map<LockKey, const Row*> expect;
  for (size_t i : idx) {
    const RenewParams& p = *params[i];
    const Row* row = Find(*rows, p.key);
    if (row != nullptr && row->holders) {
      out[i] = RenewOne(s, schema, p);
    } else if (Renews(p, row)) {
      held.push_back(i);
      expect.emplace(p.key, row);
    } else {
      out[i] = NotRenewed(p, row);
    }
  }
  if (held.empty()) return;

  absl::StatusOr<MysqlResult> r =
      s.Run(UpdateSql(schema, ttl_us, expect), context, Connection::kWrite);
  if (!r.ok()) {
    for (size_t i : held) out[i] = UnavailableUnlessBug(r.status());
    return;
  }
  // The connection reports matched rows (CLIENT_FOUND_ROWS).
  if (r->affected_rows == expect.size()) {
    for (size_t i : held) out[i] = RenewResult{params[i]->ttl, expect[params[i]->key]->token};
    return;
  }
  // A holding changed between the statements. One that still has the same
  // owner and token with a live lease was live all along (an ended lease is
  // never revived under its token), so the UPDATE extended it.
  std::vector<LockKey> changed;
  changed.reserve(expect.size());
  for (const auto& [key, row] : expect) changed.push_back(key);
  absl::StatusOr<Rows> now = ReadRows(s, schema, changed, context);
  for (size_t i : held) {
    const RenewParams& p = *params[i];
    if (!now.ok()) {
      out[i] = now.status();
      continue;
    }
    const Row* before = expect[p.key];
    const Row* after = Find(*now, p.key);
    if (Renews(p, after) && after->token == before->token) {
      out[i] = RenewResult{p.ttl, before->token};
    } else {
      out[i] = NotRenewed(p, after);
    }
  }
}

}  // namespace

absl::StatusOr<RenewResult> RenewOne(Connection& s, const MysqlSchema& schema,
                                     const RenewParams& p) {
  std::string sql = absl::StrCat("CALL ", schema.renew_proc(), "(", SqlBytes(p.key.ns), ",",
                                 SqlBytes(p.key.name), ",", SqlBytes(p.owner), ",",
                                 absl::ToInt64Microseconds(p.ttl), ",", p.fencing_token, ")");
  absl::StatusOr<MysqlResult> r =
      s.Run(sql, absl::StrCat("renew of lock ", LockName(p.key)), Connection::kWrite);
  if (!r.ok()) return UnavailableUnlessBug(r.status());
  int64_t outcome;
  uint64_t token;
  if (r->rows.size() != 1 || !ParseField(r->rows[0], 0, &outcome) ||
      !ParseField(r->rows[0], 1, &token)) {
    return Unexpected("renew", p.key);
  }
  switch (outcome) {
    case kRenewRenewed:
      return RenewResult{p.ttl, token};
    case kRenewOtherOwner:
      return HeldByOtherError(p.key);
    case kRenewFree:
      return LockFreeError(p.key);
    case kRenewOtherHold:
      return OtherHoldError(p.key);
    default:
      return Unexpected("renew", p.key);
  }
}

std::vector<absl::StatusOr<RenewResult>> RenewBatch(Connection& s, const MysqlSchema& schema,
                                                    const std::vector<const RenewParams*>& params) {
  Results out(params.size(), absl::InternalError("mysql renew: not run"));
  // One statement sets one lease length.
  std::map<int64_t, std::vector<size_t>> by_ttl;
  for (size_t i = 0; i < params.size(); ++i) {
    by_ttl[absl::ToInt64Microseconds(params[i]->ttl)].push_back(i);
  }
  for (const auto& [ttl_us, idx] : by_ttl) {
    absl::Span<const size_t> all(idx);
    for (size_t at = 0; at < all.size(); at += kRenewChunk) {
      RenewChunk(s, schema, params, all.subspan(at, kRenewChunk), ttl_us, out);
    }
  }
  return out;
}

void RenewBatcher::Add(std::vector<RenewParams> params, RenewManyCallback done) {
  if (params.empty()) {
    std::move(done)({});
    return;
  }
  auto join = std::make_shared<RenewJoin>(params.size(), std::move(done));
  bool submit = false;
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < params.size(); ++i) {
      queue_.push_back(Item{std::move(params[i]), join, i});
    }
    if (jobs_ < max_jobs_) {
      ++jobs_;
      submit = true;
    }
  }
  if (submit) pool_->SubmitFirst([this](Connection* s) { Job(s); });
}

void RenewBatcher::Job(Connection* s) {
  std::vector<Item> batch;
  {
    absl::MutexLock l(&mu_);
    size_t n = queue_.size();
    if (s != nullptr) n = std::min(n, kRenewChunk * kChunksPerJob);
    batch.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  Results results;
  if (s == nullptr) {
    results.assign(batch.size(), ShuttingDownError());
  } else if (!batch.empty()) {
    std::vector<const RenewParams*> params;
    params.reserve(batch.size());
    for (const Item& item : batch) params.push_back(&item.params);
    results = RenewBatch(*s, *schema_, params);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].join->Done(batch[i].index, std::move(results[i]));
  }
  bool again;
  {
    absl::MutexLock l(&mu_);
    again = !queue_.empty();
    if (!again) --jobs_;
  }
  // Queued again rather than looping on this thread: a job that runs
  // meanwhile gets its turn.
  if (again) pool_->SubmitFirst([this](Connection* s) { Job(s); });
}

}  // namespace lockd::mysql
