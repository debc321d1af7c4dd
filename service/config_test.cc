#include "service/config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"
#include "tests/support/temp_file.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::lockd::testing::WriteTempFile;
using ::testing::HasSubstr;

TEST(ConfigTest, DefaultsMatchTheDocumentedValues) {
  auto parsed = ParseConfig({}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const Config& c = parsed->config;
  EXPECT_EQ(c.listen, "127.0.0.1:7411");
  EXPECT_EQ(c.backend, "memory");
  EXPECT_EQ(c.lease.default_ttl, absl::Seconds(30));
  EXPECT_EQ(c.lease.min, absl::Seconds(1));
  EXPECT_EQ(c.lease.max, absl::Hours(1));
  EXPECT_EQ(c.redis.addresses, "127.0.0.1:6379");
  EXPECT_EQ(c.mysql.host, "127.0.0.1");
  EXPECT_EQ(c.mysql.port, 3306);
  EXPECT_EQ(c.zookeeper.hosts, "127.0.0.1:2181");
  EXPECT_EQ(c.zookeeper.root, "/lockd");
  EXPECT_EQ(c.zookeeper.session_timeout, absl::Seconds(10));
}

TEST(ConfigTest, FileThenEnvironmentThenFlagsInIncreasingPrecedence) {
  std::string path =
      WriteTempFile("precedence.yaml",
                    "backend: redis\n"
                    "lease:\n  default: 10s\n"
                    "redis:\n  addresses: [\"10.0.0.1:6379\", \"10.0.0.2:6379\"]\n  db: 3\n");
  auto parsed = ParseConfig({"--config", path, "--redis.db=5"},
                            {{"LOCKD_REDIS_DB", "4"}, {"LOCKD_LEASE_DEFAULT", "20s"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->config.backend, "redis");
  EXPECT_EQ(parsed->config.redis.addresses, "10.0.0.1:6379,10.0.0.2:6379");
  EXPECT_EQ(parsed->config.redis.db, 5);
  EXPECT_EQ(parsed->config.lease.default_ttl, absl::Seconds(20));
}

TEST(ConfigTest, UnknownKeyInFileIsAnErrorNamingTheKey) {
  std::string path = WriteTempFile("unknown-key.yaml", "redis:\n  adresses: x\n");
  auto parsed = ParseConfig({"--config=" + path}, {});
  ASSERT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("unknown key \"redis.adresses\""));
}

TEST(ConfigTest, UnknownFlagIsAnErrorNamingTheFlag) {
  auto parsed = ParseConfig({"--lease.defualt=3s"}, {});
  ASSERT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--lease.defualt"));
}

TEST(ConfigTest, MalformedValuesAreErrorsNamingWhereTheyCameFrom) {
  auto a = ParseConfig({"--lease.max=forever"}, {});
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("flag --lease.max"));
  auto b = ParseConfig({}, {{"LOCKD_REDIS_DB", "x"}});
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("LOCKD_REDIS_DB"));
  auto c = ParseConfig({"--backend=etcd"}, {});
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("flag --backend"));
  auto d = ParseConfig({"--lease.default=2h"}, {});
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("lease.default"));
  auto e = ParseConfig({"--keepalive_time=10ms"}, {});
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("keepalive_time"));
  auto f = ParseConfig({"--keepalive_timeout=0s"}, {});
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("keepalive_timeout"));
}

TEST(ConfigTest, UnrelatedLockdEnvironmentVariablesAreIgnored) {
  // Kubernetes injects these for a Service named lockd.
  auto parsed = ParseConfig({}, {{"LOCKD_SERVICE_HOST", "10.0.0.1"}, {"LOCKD_PORT", "tcp://x"}});
  EXPECT_TRUE(parsed.ok()) << parsed.status();
}

TEST(ConfigTest, HelpListsEveryKeyWithItsEnvironmentVariable) {
  std::string help = HelpText();
  for (const char* key :
       {"listen", "backend", "lease.default", "lease.min", "lease.max", "redis.addresses",
        "redis.password_file", "mysql.table_prefix", "zookeeper.session_timeout"}) {
    EXPECT_THAT(help, HasSubstr(std::string("--") + key + " [")) << key;
    EXPECT_THAT(help, HasSubstr(EnvName(key))) << key;
  }
  auto parsed = ParseConfig({"--help"}, {});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->help);
  EXPECT_THAT(help, HasSubstr("lockd --version"));
  parsed = ParseConfig({"--version"}, {});
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->version);
  EXPECT_FALSE(parsed->help);
}

TEST(ConfigTest, ShippedExampleFileIsValidAndMatchesTheDefaults) {
  auto parsed =
      ParseConfig({"--config", std::string(LOCKD_SOURCE_DIR) + "/deploy/lockd.example.yaml"}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Config d = DefaultConfig();
  const Config& c = parsed->config;
  EXPECT_EQ(c.listen, d.listen);
  EXPECT_EQ(c.lease.default_ttl, d.lease.default_ttl);
  EXPECT_EQ(c.redis.key_prefix, d.redis.key_prefix);
  EXPECT_EQ(c.mysql.table_prefix, d.mysql.table_prefix);
  EXPECT_EQ(c.zookeeper.session_timeout, d.zookeeper.session_timeout);
  EXPECT_EQ(c.keepalive_time, d.keepalive_time);
  EXPECT_EQ(c.keepalive_timeout, d.keepalive_timeout);
}

TEST(ConfigTest, EnvNameMapsMechanically) {
  EXPECT_EQ(EnvName("redis.addresses"), "LOCKD_REDIS_ADDRESSES");
  EXPECT_EQ(EnvName("lease.default"), "LOCKD_LEASE_DEFAULT");
}

}  // namespace
}  // namespace lockd
