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
  // Queue entries of waits whose replica stopped extending them, and version
  // 1's demand rows (a lapsed row is as good as none).
  for (const std::string* table : {&schema_->queue(), &schema_->demand()}) {
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", *table,
                           " WHERE until < TIMESTAMPADD(SECOND, -10, NOW(6)) LIMIT 1000"),
              "sweep: delete lapsed queue entries", Connection::kWrite);
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
  absl::StatusOr<MysqlResult> r =
      s.Run(absl::StrCat("SELECT ns, name, token FROM ", schema_->locks(),
                         " WHERE expires_at < NOW(6) AND queue_until < NOW(6)"
                         " ORDER BY expires_at LIMIT ",
                         kSweepBatch),
            "sweep: find expired locks", Connection::kProbe);
  if (!r.ok()) return false;
  uint64_t deleted = 0;
  for (size_t i = 0; i < r->rows.size(); i += kSweepDeleteChunk) {
    std::vector<std::string> ids;
    for (size_t j = i; j < std::min(r->rows.size(), i + kSweepDeleteChunk); ++j) {
      const MysqlRow& row = r->rows[j];
      uint64_t token;
      if (row.size() < 3 || !row[0] || !row[1] || !row[2] || !absl::SimpleAtoi(*row[2], &token)) {
        continue;
      }
      ids.push_back(absl::StrCat("(ns = ", SqlBytes(*row[0]), " AND name = ", SqlBytes(*row[1]),
                                 " AND token = ", token, ")"));
    }
    if (ids.empty()) continue;
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", schema_->locks(),
                           " WHERE expires_at < NOW(6) AND queue_until < NOW(6) AND (",
                           absl::StrJoin(ids, " OR "), ")"),
              "sweep: delete expired locks", Connection::kWrite);
    if (!d.ok()) {
      LogWarning("mysql sweeper: ", d.status().message());
      return true;
    }
    deleted += d->affected_rows;
  }
  if (deleted > 0) LogDebug("mysql sweeper: deleted ", deleted, " expired lock rows");
  return true;
}

void Sweeper::DeleteExpiredHolders(Connection& s) {
  absl::StatusOr<MysqlResult> r =
      s.Run(absl::StrCat("SELECT ns, name, owner, token FROM ", schema_->holders(),
                         " WHERE expires_at < NOW(6) ORDER BY expires_at LIMIT ", kSweepBatch),
            "sweep: find expired holders", Connection::kRead);
  if (!r.ok()) {
    LogWarning("mysql sweeper: ", r.status().message());
    return;
  }
  uint64_t deleted = 0;
  for (size_t i = 0; i < r->rows.size(); i += kSweepDeleteChunk) {
    std::vector<std::string> ids;
    for (size_t j = i; j < std::min(r->rows.size(), i + kSweepDeleteChunk); ++j) {
      const MysqlRow& row = r->rows[j];
      uint64_t token;
      if (row.size() < 4 || !row[0] || !row[1] || !row[2] || !row[3] ||
          !absl::SimpleAtoi(*row[3], &token)) {
        continue;
      }
      ids.push_back(absl::StrCat("(ns = ", SqlBytes(*row[0]), " AND name = ", SqlBytes(*row[1]),
                                 " AND owner = ", SqlBytes(*row[2]), " AND token = ", token, ")"));
    }
    if (ids.empty()) continue;
    absl::StatusOr<MysqlResult> d =
        s.Run(absl::StrCat("DELETE FROM ", schema_->holders(), " WHERE expires_at < NOW(6) AND (",
                           absl::StrJoin(ids, " OR "), ")"),
              "sweep: delete expired holders", Connection::kWrite);
    if (!d.ok()) {
      LogWarning("mysql sweeper: ", d.status().message());
      return;
    }
    deleted += d->affected_rows;
  }
  if (deleted > 0) LogDebug("mysql sweeper: deleted ", deleted, " expired holders");
}

}  // namespace lockd::mysql
