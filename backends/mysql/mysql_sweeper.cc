#include "backends/mysql/mysql_sweeper.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "util/log.h"

namespace lockd::mysql {
namespace {

// Expired rows looked at per sweep, and deleted per statement.
constexpr int kSweepBatch = 500;
constexpr size_t kSweepDeleteChunk = 100;
// Fence rows collected per collection.
constexpr int kCollectBatch = 1000;

// Collections run every tenth of the retention, between one sweep and a
// minute apart.
absl::Duration CollectInterval(const MysqlOptions& o) {
  return std::clamp(o.fence_retention / 10, o.sweep_interval,
                    std::max(o.sweep_interval, absl::Minutes(1)));
}

}  // namespace

void Sweeper::Run(Connection& s) {
  if (!DeleteExpired(s)) return;  // the health state has the reason
  DeleteExpiredHolders(s);
  // Queue entries of waits whose replica stopped extending them, replicas
  // that stopped beating, and version 1's demand rows (a lapsed row is as
  // good as none).
  for (const std::string* table : {&schema_->queue(), &schema_->replicas(), &schema_->demand()}) {
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", *table,
                           " WHERE until < TIMESTAMPADD(SECOND, -10, NOW(6)) LIMIT 1000"),
              absl::StrCat("sweep: delete lapsed rows of ", *table), Connection::kWrite);
    if (!d.ok()) LogWarning("mysql sweeper: ", d.status().message());
  }
  if (options_->fence_retention > absl::ZeroDuration() && absl::Now() >= next_collect_) {
    next_collect_ = absl::Now() + CollectInterval(*options_);
    absl::StatusOr<MysqlResult> c = s.Run(
        absl::StrCat("CALL ", schema_->collect_proc(), "(",
                     absl::ToInt64Microseconds(options_->fence_retention), ",", kCollectBatch, ")"),
        "collect idle fence counters", Connection::kWrite);
    if (!c.ok()) LogWarning("mysql sweeper: ", c.status().message());
  }
}

bool Sweeper::DeleteExpired(Connection& s) {
  // A row whose queue may still be live keeps its mark (queue_until).
  return DeleteByIdentity(s, schema_->locks(), "expires_at < NOW(6) AND queue_until < NOW(6)",
                          {"ns", "name", "token"}, "locks", Connection::kProbe);
}

void Sweeper::DeleteExpiredHolders(Connection& s) {
  DeleteByIdentity(s, schema_->holders(), "expires_at < NOW(6)", {"ns", "name", "owner", "token"},
                   "holders", Connection::kRead);
}

bool Sweeper::DeleteByIdentity(Connection& s, const std::string& table, absl::string_view expired,
                               const std::vector<std::string>& id, absl::string_view what,
                               Connection::Flags find) {
  absl::StatusOr<MysqlResult> r =
      s.Run(absl::StrCat("SELECT ", absl::StrJoin(id, ", "), " FROM ", table, " WHERE ", expired,
                         " ORDER BY expires_at LIMIT ", kSweepBatch),
            absl::StrCat("sweep: find expired ", what), find);
  if (!r.ok()) {
    if (!find.probe) LogWarning("mysql sweeper: ", r.status().message());
    return false;
  }
  uint64_t deleted = 0;
  for (size_t i = 0; i < r->rows.size(); i += kSweepDeleteChunk) {
    std::vector<std::string> ids;
    for (size_t j = i; j < std::min(r->rows.size(), i + kSweepDeleteChunk); ++j) {
      const MysqlRow& row = r->rows[j];
      if (row.size() != id.size()) continue;
      // Every column but the last (the token, a number) is a byte string.
      std::vector<std::string> terms;
      uint64_t token;
      for (size_t c = 0; c < id.size(); ++c) {
        if (!row[c]) break;
        if (c + 1 < id.size()) {
          terms.push_back(absl::StrCat(id[c], " = ", SqlBytes(*row[c])));
        } else if (absl::SimpleAtoi(*row[c], &token)) {
          terms.push_back(absl::StrCat(id[c], " = ", token));
        }
      }
      if (terms.size() == id.size())
        ids.push_back(absl::StrCat("(", absl::StrJoin(terms, " AND "), ")"));
    }
    if (ids.empty()) continue;
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", table, " WHERE ", expired, " AND (",
                           absl::StrJoin(ids, " OR "), ")"),
              absl::StrCat("sweep: delete expired ", what), Connection::kWrite);
    if (!d.ok()) {
      LogWarning("mysql sweeper: ", d.status().message());
      return true;
    }
    deleted += d->affected_rows;
  }
  if (deleted > 0) LogDebug("mysql sweeper: deleted ", deleted, " expired ", what);
  return true;
}

}  // namespace lockd::mysql
