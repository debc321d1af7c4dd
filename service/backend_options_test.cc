// Each backend's configuration keys (backends/<name>/<name>_options.cc) as
// lockd's configuration sees them: parsed from the file, the environment and
// flags into the backend's own options struct, defaulting to its member
// initializers, with the shared password rules.

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/config.h"
#include "tests/support/temp_file.h"

namespace lockd {
namespace {

using ::lockd::testing::WriteTempFile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(BackendOptionsTest, RedisKeysParseFromFileEnvironmentAndFlags) {
  std::string path = WriteTempFile("redis.yaml",
                                   "redis:\n  addresses: [\"a:1\", \"b:2\"]\n  db: 3\n"
                                   "  key_prefix: shop\n");
  auto parsed = ParseConfig({"--config", path, "--redis.command_timeout=250ms"},
                            {{"LOCKD_REDIS_POOL_SIZE", "7"}, {"LOCKD_REDIS_USERNAME", "u"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const RedisOptions& o = parsed->config.redis;
  EXPECT_EQ(o.addresses, "a:1,b:2");
  EXPECT_EQ(o.db, 3);
  EXPECT_EQ(o.key_prefix, "shop");
  EXPECT_EQ(o.pool_size, 7);
  EXPECT_EQ(o.username, "u");
  EXPECT_EQ(o.command_timeout, absl::Milliseconds(250));
  EXPECT_EQ(o.connect_timeout, RedisOptions().connect_timeout);
}

TEST(BackendOptionsTest, MysqlKeysParseFromFileEnvironmentAndFlags) {
  std::string path = WriteTempFile("mysql.yaml",
                                   "mysql:\n  host: db.local\n  port: 3307\n  fair_slice: 0s\n"
                                   "  ssl_mode: verify_identity\n  ssl_ca: /ca.pem\n");
  auto parsed = ParseConfig({"--config=" + path, "--mysql.pool_size", "3"},
                            {{"LOCKD_MYSQL_TABLE_PREFIX", "t_"}, {"LOCKD_MYSQL_PORT", "3308"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const MysqlOptions& o = parsed->config.mysql;
  EXPECT_EQ(o.host, "db.local");
  EXPECT_EQ(o.port, 3308);  // the environment beats the file
  EXPECT_EQ(o.fair_slice, absl::ZeroDuration());
  EXPECT_EQ(o.ssl_mode, MysqlSslMode::kVerifyIdentity);
  EXPECT_EQ(o.ssl_ca, "/ca.pem");
  EXPECT_EQ(o.pool_size, 3u);
  EXPECT_EQ(o.table_prefix, "t_");

  auto required = ParseConfig({"--mysql.ssl_mode=required"}, {});
  ASSERT_TRUE(required.ok()) << required.status();
  EXPECT_EQ(required->config.mysql.ssl_mode, MysqlSslMode::kRequired);
}

TEST(BackendOptionsTest, ZooKeeperKeysParseFromFileEnvironmentAndFlags) {
  std::string path = WriteTempFile("zookeeper.yaml", "zookeeper:\n  hosts: zk1:2181,zk2:2181\n");
  auto parsed = ParseConfig({"--config", path, "--zookeeper.reap_interval=5s"},
                            {{"LOCKD_ZOOKEEPER_SESSION_TIMEOUT", "4s"},
                             {"LOCKD_ZOOKEEPER_ROOT", "/locks"},
                             {"LOCKD_ZOOKEEPER_AUTH_FILE", "/secrets/zk"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ZooKeeperOptions& o = parsed->config.zookeeper;
  EXPECT_EQ(o.hosts, "zk1:2181,zk2:2181");
  EXPECT_EQ(o.root, "/locks");
  EXPECT_EQ(o.session_timeout, absl::Seconds(4));
  EXPECT_EQ(o.reap_interval, absl::Seconds(5));
  EXPECT_EQ(o.auth_file, "/secrets/zk");
  EXPECT_EQ(o.digest, "");  // read only when the backend starts
}

// Every key's default is shown by --help exactly as its struct initializer
// formats, and parses back to the same value.
template <typename T>
void ExpectDefaultsAreTheInitializers(const OptionSet<T>& keys, const T& configured) {
  const T initial{};
  for (const auto& b : keys.bindings()) {
    EXPECT_EQ(b.get(configured), b.get(initial)) << b.key;
    EXPECT_THAT(HelpText(), HasSubstr("--" + b.key + " [" + b.get(initial) + "]\n")) << b.key;
    T reparsed{};
    ASSERT_TRUE(b.set(reparsed, b.get(initial)).ok()) << b.key;
    EXPECT_EQ(b.get(reparsed), b.get(initial)) << b.key;
  }
}

TEST(BackendOptionsTest, DefaultsAreTheOptionStructInitializers) {
  auto parsed = ParseConfig({}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Config& c = parsed->config;
  ExpectDefaultsAreTheInitializers(RedisOptionSet(), c.redis);
  ExpectDefaultsAreTheInitializers(MysqlOptionSet(), c.mysql);
  ExpectDefaultsAreTheInitializers(ZooKeeperOptionSet(), c.zookeeper);
  ExpectDefaultsAreTheInitializers(ConfigOptions(), c);

  EXPECT_EQ(c.max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(MemoryOptions().max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(RedisOptions().max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(MysqlOptions().max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(ZooKeeperOptions().max_waiters, kDefaultMaxWaiters);
  EXPECT_EQ(MysqlOptions().ssl_mode, MysqlSslMode::kDisabled);
}

TEST(BackendOptionsTest, EveryKeyIsDeclaredOnce) {
  std::set<std::string> seen;
  for (const auto& b : ConfigOptions().bindings()) {
    EXPECT_TRUE(seen.insert(b.key).second) << b.key;
  }
  for (const char* key : {"redis.pool_size", "mysql.ssl_mode", "zookeeper.auth_file"}) {
    EXPECT_EQ(seen.count(key), 1u) << key;
  }
}

TEST(BackendOptionsTest, BadValuesAreErrorsNamingTheKey) {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string where;
    std::string what;
  };
  std::string file = WriteTempFile("bad.yaml", "zookeeper:\n  session_timeout: forever\n");
  const Case cases[] = {
      {{"--redis.pool_size=0"}, {}, "flag --redis.pool_size", "integer in [1, 1024]"},
      {{"--redis.connect_timeout=-1s"}, {}, "flag --redis.connect_timeout", "duration"},
      {{},
       {{"LOCKD_MYSQL_SSL_MODE", "on"}},
       "LOCKD_MYSQL_SSL_MODE",
       "expected one of disabled, required, verify_identity, got \"on\""},
      {{}, {{"LOCKD_MYSQL_PORT", "70000"}}, "LOCKD_MYSQL_PORT", "[0, 65535]"},
      {{"--config", file}, {}, "key \"zookeeper.session_timeout\"", "got \"forever\""},
      {{"--max_waiters=0"}, {}, "flag --max_waiters", "integer"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseConfig(c.args, c.env);
    ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << c.where;
    EXPECT_THAT(Message(parsed.status()), AllOf(HasSubstr(c.where), HasSubstr(c.what)));
  }
}

TEST(BackendOptionsTest, PasswordFileIsReadWhenTheBackendStarts) {
  std::string file = WriteTempFile("password2", "s3cret-77 \n second line\n");
  RedisOptions redis;
  redis.password_file = file;
  ASSERT_TRUE(RedisOptionSet().Resolve(&redis).ok());
  EXPECT_EQ(redis.password, "s3cret-77");

  MysqlOptions mysql;
  mysql.password_file = file;
  ASSERT_TRUE(MysqlOptionSet().Resolve(&mysql).ok());
  EXPECT_EQ(mysql.password, "s3cret-77");

  MysqlOptions missing;
  missing.password_file = file + ".missing";
  absl::Status s = MysqlOptionSet().Resolve(&missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), HasSubstr("mysql.password_file: cannot read secret file"));
}

TEST(BackendOptionsTest, ZooKeeperAuthFileMustHoldUserColonPassword) {
  ZooKeeperOptions good;
  good.auth_file = WriteTempFile("zk-good", "lockd:pw-1\n");
  ASSERT_TRUE(ZooKeeperOptionSet().Resolve(&good).ok());
  EXPECT_EQ(good.digest, "lockd:pw-1");

  ZooKeeperOptions bad;
  bad.auth_file = WriteTempFile("zk-bad", "no-colon-9e2b\n");
  absl::Status s = ZooKeeperOptionSet().Resolve(&bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), AllOf(HasSubstr("zookeeper.auth_file: "), HasSubstr("user:password"),
                                Not(HasSubstr("9e2b"))));
}

}  // namespace
}  // namespace lockd
