#include "tests/support/zookeeper_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace lockd::testing {
namespace {

constexpr char kJarDir[] = "/usr/share/java";

// What ZooKeeperServerMain needs from Debian's jars (the rest of the
// ZooKeeper classpath is for the CLI and Jetty). slf4j-simple makes the
// server log to stderr, which Subprocess sends to the log file.
const char* const kJars[] = {
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "commons-cli.jar",
    "commons-io.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
};

std::string Classpath() {
  std::vector<std::string> jars;
  for (const char* jar : kJars) {
    std::string path = absl::StrCat(kJarDir, "/", jar);
    if (::access(path.c_str(), R_OK) == 0) jars.push_back(path);
  }
  return absl::StrJoin(jars, ":");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZooKeeperServer>> ZooKeeperServer::Start(const Options& options) {
  std::unique_ptr<ZooKeeperServer> s(new ZooKeeperServer(options));
  s->java_ = FindExecutable({"java", "/usr/lib/jvm/default-java/bin/java"});
  if (s->java_.empty()) return absl::NotFoundError("java not found (install default-jre-headless)");
  if (::access(absl::StrCat(kJarDir, "/zookeeper.jar").c_str(), R_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat(kJarDir, "/zookeeper.jar not found (install zookeeper)"));
  }
  s->classpath_ = Classpath();
  if (s->dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  s->port_ = FreePort();
  if (s->port_ == 0) return absl::InternalError("no free port");
  int tick_ms = static_cast<int>(absl::ToInt64Milliseconds(options.tick_time));
  std::string data = absl::StrCat(s->dir(), "/data");
  std::string cfg = absl::StrCat(
      "tickTime=", tick_ms, "\n",               //
      "dataDir=", data, "\n",                   //
      "clientPort=", s->port_, "\n",            //
      "clientPortAddress=127.0.0.1\n",          //
      "maxClientCnxns=0\n",                     //
      "minSessionTimeout=", 2 * tick_ms, "\n",  //
      "maxSessionTimeout=", absl::ToInt64Milliseconds(options.max_session_timeout), "\n",
      "admin.enableServer=false\n",  //
      "4lw.commands.whitelist=*\n",  //
      "forceSync=", options.force_sync ? "yes" : "no", "\n");
  if (absl::Status st = WriteFile(absl::StrCat(s->dir(), "/zoo.cfg"), cfg); !st.ok()) return st;
  if (absl::Status st = s->Launch(); !st.ok()) return st;
  return s;
}

ZooKeeperServer::~ZooKeeperServer() { Stop(); }

std::string ZooKeeperServer::hosts() const { return absl::StrCat("127.0.0.1:", port_); }

absl::Status ZooKeeperServer::Launch() {
  ++launches_;
  std::vector<std::string> argv = {
      java_,
      "-Xmx512m",
      "-XX:+UseSerialGC",
      "-XX:-UsePerfData",
      "-Djava.net.preferIPv4Stack=true",
      absl::StrCat("-Dznode.container.checkIntervalMs=",
                   absl::ToInt64Milliseconds(options_.container_check_interval)),
      "-Dorg.slf4j.simpleLogger.showDateTime=true",
      "-cp",
      classpath_,
      "org.apache.zookeeper.server.ZooKeeperServerMain",
      absl::StrCat(dir(), "/zoo.cfg"),
  };
  std::string log = absl::StrCat(dir(), "/zookeeper.log");
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv, log);
  if (!p.ok()) return p.status();
  process_ = *std::move(p);
  absl::Time deadline = absl::Now() + options_.start_timeout;
  while (absl::Now() < deadline) {
    if (!process_->Running()) {
      return absl::UnavailableError(
          absl::StrCat("ZooKeeper exited during start; its log:\n", Log()));
    }
    absl::StatusOr<std::string> answer = Command("ruok");
    if (answer.ok() && *answer == "imok") return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::string text = Log();
  process_->Kill();
  return absl::UnavailableError(absl::StrCat("ZooKeeper did not answer within ",
                                             absl::FormatDuration(options_.start_timeout),
                                             "; its log:\n", text));
}

void ZooKeeperServer::Stop() {
  if (process_ == nullptr) return;
  process_->Signal(SIGCONT);  // in case it is paused
  process_->Stop(absl::Seconds(10));
  process_.reset();
}

void ZooKeeperServer::Kill() {
  if (process_ == nullptr) return;
  process_->Kill();
  process_.reset();
}

absl::Status ZooKeeperServer::Restart() {
  Stop();
  return Launch();
}

void ZooKeeperServer::Pause() {
  if (process_ != nullptr) process_->Signal(SIGSTOP);
}

void ZooKeeperServer::Resume() {
  if (process_ != nullptr) process_->Signal(SIGCONT);
}

bool ZooKeeperServer::running() { return process_ != nullptr && process_->Running(); }

absl::StatusOr<std::string> ZooKeeperServer::Command(absl::string_view word) const {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return absl::UnavailableError("cannot connect");
  }
  if (::send(fd, word.data(), word.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(word.size())) {
    ::close(fd);
    return absl::UnavailableError("cannot send");
  }
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

std::string ZooKeeperServer::Log() const {
  return ReadFileOrEmpty(absl::StrCat(dir(), "/zookeeper.log"));
}

}  // namespace lockd::testing
