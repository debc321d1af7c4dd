#include "util/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lockd {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Runs `fn` with stderr redirected to a file; returns what it wrote.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  // Named after the process: ctest runs each test case as its own process,
  // several at once.
  std::string path =
      ::testing::TempDir() + "/lockd-log-test-" + std::to_string(::getpid()) + ".txt";
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR, 0600);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  fn();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
  ::close(fd);
  ::unlink(path.c_str());
  return out;
}

TEST(LogTest, TextLinesQuoteFieldValuesThatNeedIt) {
  SetLogFormat(LogFormat::kText);
  std::string out = CaptureStderr([] {
    LogFields(LogLevel::kWarning, "audit",
              {{"identity", "spiffe://x/y"}, {"name", "a \"b\"\n"}, {"empty", ""}});
  });
  EXPECT_THAT(out,
              HasSubstr(" WARN audit identity=spiffe://x/y name=\"a \\\"b\\\"\\n\" empty=\"\"\n"));
}

TEST(LogTest, JsonLinesHaveStableFieldsAndEscapes) {
  SetLogFormat(LogFormat::kJson);
  std::string out = CaptureStderr([] {
    LogFields(LogLevel::kWarning, "audit", {{"audit", "denied"}, {"name", "tab\there\x01"}});
    LogInfo("plain \"message\"");
    LogDebug("dropped below the level");
  });
  SetLogFormat(LogFormat::kText);
  std::string first = out.substr(0, out.find('\n'));
  EXPECT_THAT(first, StartsWith("{\"ts\":\""));
  EXPECT_THAT(first, EndsWith("\",\"level\":\"warning\",\"msg\":\"audit\",\"audit\":\"denied\","
                              "\"name\":\"tab\\there\\u0001\"}"));
  EXPECT_THAT(out, HasSubstr("\"level\":\"info\",\"msg\":\"plain \\\"message\\\"\"}\n"));
  EXPECT_THAT(out, ::testing::Not(HasSubstr("dropped")));
  LogFormat f;
  EXPECT_TRUE(ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("xml", &f));
}

}  // namespace
}  // namespace lockd
