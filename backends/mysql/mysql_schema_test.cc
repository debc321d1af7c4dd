#include "backends/mysql/mysql_schema.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/status_matchers.h"

namespace lockd {
namespace {

using ::lockd::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(MysqlSchemaTest, NamesCarryThePrefix) {
  absl::StatusOr<MysqlSchema> s = MysqlSchema::ForPrefix("t1_");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->locks(), "`t1_locks`");
  EXPECT_EQ(s->fences(), "`t1_fences`");
  EXPECT_EQ(s->meta(), "`t1_meta`");
  EXPECT_THAT(s->acquire_proc(), StartsWith("`t1_acquire_"));
  EXPECT_THAT(s->release_proc(), StartsWith("`t1_release_"));
  EXPECT_THAT(s->renew_proc(), StartsWith("`t1_renew_"));
  EXPECT_THAT(s->collect_proc(), StartsWith("`t1_collect_"));
}

TEST(MysqlSchemaTest, EmptyPrefixIsAllowed) {
  absl::StatusOr<MysqlSchema> s = MysqlSchema::ForPrefix("");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->locks(), "`locks`");
}

TEST(MysqlSchemaTest, BadPrefixIsInvalidArgumentNamingTheOption) {
  for (const char* bad :
       {"a-b", "a`b", "a b", "a.b", "ä", "0123456789012345678901234567890123456789x"}) {
    absl::StatusOr<MysqlSchema> s = MysqlSchema::ForPrefix(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_THAT(s.status().message(), HasSubstr("mysql.table_prefix"));
  }
  EXPECT_TRUE(MysqlSchema::ForPrefix("0123456789012345678901234567890123456789").ok());
}

TEST(MysqlSchemaTest, ProcedureNamesFitMysqlIdentifiersAndAreStable) {
  std::string prefix(40, 'p');
  absl::StatusOr<MysqlSchema> a = MysqlSchema::ForPrefix(prefix);
  absl::StatusOr<MysqlSchema> b = MysqlSchema::ForPrefix(prefix);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [name, sql] : a->CreateProcedures()) {
    EXPECT_LE(name.size(), 64u) << name;
    EXPECT_THAT(sql, StartsWith("CREATE PROCEDURE `" + name + "`"));
  }
  EXPECT_EQ(a->acquire_proc(), b->acquire_proc());
  // Different prefixes give different bodies (table names), hence new names.
  absl::StatusOr<MysqlSchema> c = MysqlSchema::ForPrefix("other_");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->acquire_proc().substr(a->acquire_proc().size() - 9),
            c->acquire_proc().substr(c->acquire_proc().size() - 9));
}

TEST(MysqlSchemaTest, TablesAreInnodbWithAUniqueKeyOnNamespaceAndName) {
  absl::StatusOr<MysqlSchema> s = MysqlSchema::ForPrefix("x_");
  ASSERT_TRUE(s.ok());
  std::vector<std::string> tables = s->CreateTables();
  ASSERT_EQ(tables.size(), 7u);
  for (const std::string& t : tables) {
    EXPECT_THAT(t, StartsWith("CREATE TABLE IF NOT EXISTS `x_"));
    EXPECT_THAT(t, HasSubstr("ENGINE=InnoDB"));
  }
  EXPECT_THAT(tables[1], HasSubstr("PRIMARY KEY (ns, name)"));
  EXPECT_THAT(tables[1], HasSubstr("expires_at DATETIME(6)"));
  EXPECT_THAT(tables[2], HasSubstr("PRIMARY KEY (ns, name)"));
  // Holders: one row per (name, owner), each with its own lease.
  EXPECT_THAT(tables[4], HasSubstr("PRIMARY KEY (ns, name, owner)"));
  EXPECT_THAT(tables[4], HasSubstr("expires_at DATETIME(6)"));
  // The queue: entries in arrival order, one per owner and replica.
  EXPECT_THAT(tables[5], HasSubstr("UNIQUE KEY entry (ns, name, owner, replica)"));
  EXPECT_THAT(tables[5], HasSubstr("until DATETIME(6)"));
  // Replicas: one row per live lockd, by its beat.
  EXPECT_THAT(tables[6], HasSubstr("PRIMARY KEY (replica)"));
  EXPECT_THAT(tables[6], HasSubstr("until DATETIME(6)"));
}

TEST(MysqlSchemaTest, ProceduresUseOnlyTheDatabaseClock) {
  absl::StatusOr<MysqlSchema> s = MysqlSchema::ForPrefix("x_");
  ASSERT_TRUE(s.ok());
  for (const auto& [name, sql] : s->CreateProcedures()) {
    EXPECT_THAT(sql, HasSubstr("NOW(6)")) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{locks}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{fences}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{meta}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{bump_fence}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{demand}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("_demand}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{holders}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{queue}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{enqueue}"))) << name;
    EXPECT_THAT(sql, Not(HasSubstr("{drop_entry}"))) << name;
    EXPECT_THAT(sql, HasSubstr("SQL SECURITY INVOKER")) << name;
  }
}

}  // namespace
}  // namespace lockd
