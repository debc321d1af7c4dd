// The MySQL backend's housekeeping, run by one replica job at a time: deletes
// lock rows whose lease ended (unless their queue may be live), each SHARED or
// semaphore holder whose own lease ended (one by one: the others keep
// theirs), lapsed queue entries, replica rows and demand rows, and (every tenth of
// fence_retention) idle fencing counters. Its first statement doubles as the
// health probe (it connects even while connects fail fast).
//
// Not thread-safe: the backend runs one sweep at a time.

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_SWEEPER_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_SWEEPER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "backends/mysql/mysql_backend.h"
#include "backends/mysql/mysql_connection.h"
#include "backends/mysql/mysql_schema.h"

namespace lockd::mysql {

class Sweeper {
 public:
  // `options` and `schema` must outlive the sweeper.
  Sweeper(const MysqlOptions* options, const MysqlSchema* schema)
      : options_(options), schema_(schema) {}

  // One sweep on `s`. Each DELETE names the rows it saw by identity (ns,
  // name, token; a holder also by owner) and re-checks `expires_at <
  // NOW(6)` on the locked row, so a lease renewed or re-granted after the
  // SELECT survives. Failures are logged (warnings) or left to the health
  // state; never returned.
  void Run(Connection& s);

 private:
  // False if the first statement (the health probe) failed.
  bool DeleteExpired(Connection& s);
  void DeleteExpiredHolders(Connection& s);
  // Finds up to a batch of rows of `table` matching `expired` (read with
  // `find` flags), then deletes each by its `id` columns (the last one a
  // number), `expired` re-checked. False if the find failed.
  bool DeleteByIdentity(Connection& s, const std::string& table, absl::string_view expired,
                        const std::vector<std::string>& id, absl::string_view what,
                        Connection::Flags find);

  const MysqlOptions* const options_;
  const MysqlSchema* const schema_;
  absl::Time next_collect_ = absl::InfinitePast();
};

}  // namespace lockd::mysql

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_SWEEPER_H_
