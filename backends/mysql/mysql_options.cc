#include "backends/mysql/mysql_options.h"

namespace lockd {

const OptionSet<MysqlOptions>& MysqlOptionSet() {
  using O = MysqlOptions;
  static const auto* set = [] {
    auto* s = new OptionSet<O>;
    s->String("mysql.host", &O::host, "MySQL/MariaDB host");
    s->Int("mysql.port", &O::port, 0, 65535, "MySQL/MariaDB port");
    s->String("mysql.socket", &O::socket, "Unix socket path (used instead of host:port when set)");
    s->String("mysql.user", &O::user, "database user");
    s->Password("mysql.password", &O::password,
                "database password; prefer LOCKD_MYSQL_PASSWORD or mysql.password_file",
                "mysql.password_file", &O::password_file,
                "file whose first line is the database password");
    s->String("mysql.database", &O::database, "database (schema) holding lockd's tables");
    s->String("mysql.table_prefix", &O::table_prefix, "prefix of lockd's table names");
    s->Int("mysql.pool_size", &O::pool_size, 1, 1024, "database connections");
    s->PositiveDuration("mysql.sweep_interval", &O::sweep_interval,
                        "how often expired lock rows are deleted");
    BindSharedOptions(*s, "mysql");
    s->Duration("mysql.fair_slice", &O::fair_slice, "unused: waiting is FIFO across replicas");
    s->PositiveDuration("mysql.connect_timeout", &O::connect_timeout, "database connect timeout");
    s->PositiveDuration("mysql.read_timeout", &O::read_timeout, "database read timeout");
    s->PositiveDuration("mysql.write_timeout", &O::write_timeout, "database write timeout");
    s->Enum("mysql.ssl_mode", &O::ssl_mode,
            {{"disabled", MysqlSslMode::kDisabled},
             {"required", MysqlSslMode::kRequired},
             {"verify_identity", MysqlSslMode::kVerifyIdentity}},
            "TLS to the database: disabled, required or verify_identity");
    s->String("mysql.ssl_ca", &O::ssl_ca, "CA certificate file for TLS");
    s->String("mysql.ssl_cert", &O::ssl_cert, "client certificate file for TLS");
    s->String("mysql.ssl_key", &O::ssl_key, "client key file for TLS");
    return s;
  }();
  return *set;
}

}  // namespace lockd
