#include "util/version.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

TEST(VersionTest, VersionIsTheVersionFilesAndTheLineNamesTheRevision) {
  EXPECT_EQ(Version(), LOCKD_PROJECT_VERSION);
  EXPECT_FALSE(Revision().empty());
  EXPECT_EQ(VersionLine("lockd"), std::string("lockd ") + LOCKD_PROJECT_VERSION + " (git " +
                                      std::string(Revision()) + ")");
}

}  // namespace
}  // namespace lockd
