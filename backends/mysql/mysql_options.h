// The MySQL/MariaDB backend's options and their configuration keys (mysql.*).

#ifndef LOCKD_BACKENDS_MYSQL_MYSQL_OPTIONS_H_
#define LOCKD_BACKENDS_MYSQL_MYSQL_OPTIONS_H_

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "backends/common/options.h"
#include "backends/common/shared_options.h"

namespace lockd {

enum class MysqlSslMode {
  kDisabled,        // plain TCP
  kRequired,        // TLS, server certificate not verified
  kVerifyIdentity,  // TLS, certificate and host name verified (needs ssl_ca)
};

// max_waiters, release_memory and fence_retention: shared_options.h (a lock
// name's counter row is deleted once no grant used it for fence_retention;
// the next grant of that name continues above every collected counter, the
// floor in <prefix>meta, so tokens still only grow).
struct MysqlOptions : WaiterLimit, ReleaseMemory, FenceRetention {
  // Where the server is: `socket` (a Unix socket path) wins over host:port.
  std::string host = "127.0.0.1";
  int port = 3306;
  std::string socket;

  std::string user = "lockd";
  std::string password;  // secret: never logged, never put in a status
  // File whose first line is the password; read into `password` by
  // MysqlOptionSet().Resolve() (NewMysqlBackend ignores it).
  std::string password_file;
  std::string database = "lockd";
  // Prefix of every table and procedure name: [A-Za-z0-9_]{0,40}. Several
  // deployments can share one database with different prefixes.
  std::string table_prefix = "lockd_";

  // Connections, and worker threads (one per connection).
  size_t pool_size = 8;
  // How often this replica deletes expired rows.
  absl::Duration sweep_interval = absl::Seconds(1);

  // Client timeouts. The C client counts read and write timeouts in whole
  // seconds; they are rounded up.
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration read_timeout = absl::Seconds(2);
  absl::Duration write_timeout = absl::Seconds(2);

  MysqlSslMode ssl_mode = MysqlSslMode::kDisabled;
  std::string ssl_ca;    // CA certificate file (PEM)
  std::string ssl_cert;  // client certificate file, for X.509 authentication
  std::string ssl_key;   // client key file

  // Backoff of a parked waiter that polls the database: starts at
  // initial_retry, doubles up to max_retry, each delay jittered by +-25%.
  absl::Duration initial_retry = absl::Milliseconds(2);
  absl::Duration max_retry = absl::Milliseconds(50);
  // Unused: waiting is FIFO across replicas through the database's queue
  // (schema version 2), so replicas take turns in queue order. The key is
  // still accepted so that older configurations load.
  absl::Duration fair_slice = absl::Milliseconds(200);
};

// The keys that configure MysqlOptions, for service/config.cc. Resolve()
// reads mysql.password_file; setting it and mysql.password is an error.
const OptionSet<MysqlOptions>& MysqlOptionSet();

}  // namespace lockd

#endif  // LOCKD_BACKENDS_MYSQL_MYSQL_OPTIONS_H_
