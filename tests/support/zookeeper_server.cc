#include "tests/support/zookeeper_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
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

constexpr char kStandaloneMain[] = "org.apache.zookeeper.server.ZooKeeperServerMain";
constexpr char kQuorumMain[] = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

}  // namespace

absl::Status ZooKeeperServer::Prepare() {
  java_ = FindExecutable({"java", "/usr/lib/jvm/default-java/bin/java"});
  if (java_.empty()) return absl::NotFoundError("java not found (install default-jre-headless)");
  if (::access(absl::StrCat(kJarDir, "/zookeeper.jar").c_str(), R_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat(kJarDir, "/zookeeper.jar not found (install zookeeper)"));
  }
  classpath_ = Classpath();
  if (dir_.path().empty()) return absl::InternalError("cannot create a temporary directory");
  port_ = FreePort();
  if (port_ == 0) return absl::InternalError("no free port");
  return absl::OkStatus();
}

std::string ZooKeeperServer::BaseConfig() const {
  int tick_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.tick_time));
  return absl::StrCat("tickTime=", tick_ms, "\n",               //
                      "dataDir=", dir(), "/data\n",             //
                      "clientPort=", port_, "\n",               //
                      "clientPortAddress=127.0.0.1\n",          //
                      "maxClientCnxns=0\n",                     //
                      "minSessionTimeout=", 2 * tick_ms, "\n",  //
                      "maxSessionTimeout=", absl::ToInt64Milliseconds(options_.max_session_timeout),
                      "\n",
                      "admin.enableServer=false\n",  //
                      "4lw.commands.whitelist=*\n",  //
                      "forceSync=", options_.force_sync ? "yes" : "no", "\n");
}

absl::StatusOr<std::unique_ptr<ZooKeeperServer>> ZooKeeperServer::Start(const Options& options) {
  std::unique_ptr<ZooKeeperServer> s(new ZooKeeperServer(options, kStandaloneMain));
  if (absl::Status st = s->Prepare(); !st.ok()) return st;
  if (absl::Status st = WriteFile(absl::StrCat(s->dir(), "/zoo.cfg"), s->BaseConfig()); !st.ok()) {
    return st;
  }
  if (absl::Status st = s->Launch(); !st.ok()) return st;
  return s;
}

ZooKeeperServer::~ZooKeeperServer() { Stop(); }

std::string ZooKeeperServer::hosts() const { return absl::StrCat("127.0.0.1:", port_); }

absl::Status ZooKeeperServer::Launch() {
  if (absl::Status s = Spawn(); !s.ok()) return s;
  return AwaitAnswer();
}

absl::Status ZooKeeperServer::Spawn() {
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
  };
  argv.insert(argv.end(), jvm_flags_.begin(), jvm_flags_.end());
  argv.insert(argv.end(), {"-cp", classpath_, main_class_, absl::StrCat(dir(), "/zoo.cfg")});
  std::string log = absl::StrCat(dir(), "/zookeeper.log");
  absl::StatusOr<std::unique_ptr<Subprocess>> p = Subprocess::Start(argv, log);
  if (!p.ok()) return p.status();
  process_ = *std::move(p);
  return absl::OkStatus();
}

absl::Status ZooKeeperServer::AwaitAnswer() {
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

// ---- ZooKeeperEnsemble -----------------------------------------------------

absl::StatusOr<std::unique_ptr<ZooKeeperEnsemble>> ZooKeeperEnsemble::Start(
    const Options& options) {
  std::unique_ptr<ZooKeeperEnsemble> e(new ZooKeeperEnsemble());
  std::string members;
  for (int i = 0; i < kSize; ++i) {
    e->servers_.push_back(
        std::unique_ptr<ZooKeeperServer>(new ZooKeeperServer(options.server, kQuorumMain)));
    // Three JVMs on a small machine: compiling with C1 only halves their CPU
    // time (the ensemble's conformance run: 44 s user time -> 24 s).
    e->servers_.back()->jvm_flags_ = {"-XX:TieredStopAtLevel=1"};
    if (absl::Status s = e->servers_.back()->Prepare(); !s.ok()) return s;
    int peer = FreePort(), election = FreePort();
    if (peer == 0 || election == 0) return absl::InternalError("no free port");
    absl::StrAppend(&members, "server.", i + 1, "=127.0.0.1:", peer, ":", election, "\n");
  }
  for (int i = 0; i < kSize; ++i) {
    ZooKeeperServer& s = *e->servers_[i];
    std::string data = absl::StrCat(s.dir(), "/data");
    if (::mkdir(data.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat("cannot create ", data));
    }
    if (absl::Status st = WriteFile(absl::StrCat(data, "/myid"), absl::StrCat(i + 1, "\n"));
        !st.ok()) {
      return st;
    }
    std::string cfg = absl::StrCat(s.BaseConfig(),                          //
                                   "initLimit=", options.init_limit, "\n",  //
                                   "syncLimit=", options.sync_limit, "\n", members);
    if (absl::Status st = WriteFile(absl::StrCat(s.dir(), "/zoo.cfg"), cfg); !st.ok()) return st;
  }
  // Java starts slowly: all three at once, then wait for each.
  for (auto& s : e->servers_) {
    if (absl::Status st = s->Spawn(); !st.ok()) return st;
  }
  for (auto& s : e->servers_) {
    if (absl::Status st = s->AwaitAnswer(); !st.ok()) return st;
  }
  if (absl::Status st = e->WaitForQuorum(options.server.start_timeout); !st.ok()) return st;
  return e;
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() {
  // Each JVM takes a moment to shut down: let them do it together.
  for (auto& s : servers_) {
    if (s->process_ == nullptr) continue;
    s->process_->Signal(SIGCONT);  // in case it is paused
    s->process_->Signal(SIGTERM);
  }
  for (auto& s : servers_) s->Stop();
}

std::string ZooKeeperEnsemble::hosts() const {
  std::vector<std::string> hosts;
  for (const auto& s : servers_) hosts.push_back(s->hosts());
  return absl::StrJoin(hosts, ",");
}

std::string ZooKeeperEnsemble::Mode(int i) const {
  absl::StatusOr<std::string> srvr = servers_[i]->Command("srvr");
  if (!srvr.ok()) return "";
  const std::string kLabel = "Mode: ";
  size_t at = srvr->find(kLabel);
  if (at == std::string::npos) return "";
  size_t begin = at + kLabel.size();
  return srvr->substr(begin, srvr->find('\n', begin) - begin);
}

int ZooKeeperEnsemble::Leader() const {
  for (int i = 0; i < kSize; ++i) {
    if (Mode(i) == "leader") return i;
  }
  return -1;
}

int ZooKeeperEnsemble::ServerOf(int64_t session_id) const {
  std::string sid = absl::StrCat("sid=0x", absl::Hex(static_cast<uint64_t>(session_id)), ",");
  for (int i = 0; i < kSize; ++i) {
    absl::StatusOr<std::string> cons = servers_[i]->Command("cons");
    if (cons.ok() && absl::StrContains(*cons, sid)) return i;
  }
  return -1;
}

absl::Status ZooKeeperEnsemble::WaitForQuorum(absl::Duration timeout) {
  std::vector<std::string> modes(kSize);
  auto serves = [&] {
    int leaders = 0, serving = 0;
    for (int i = 0; i < kSize; ++i) {
      modes[i] = Mode(i);
      if (modes[i] == "leader") ++leaders;
      if (modes[i] == "leader" || modes[i] == "follower") ++serving;
    }
    return leaders == 1 && serving > kSize / 2;
  };
  if (WaitFor(serves, timeout, absl::Milliseconds(50))) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("no ZooKeeper quorum within ",
                                             absl::FormatDuration(timeout), "; modes [",
                                             absl::StrJoin(modes, ", "), "]\n", Logs()));
}

std::string ZooKeeperEnsemble::Logs() const {
  std::string out;
  for (int i = 0; i < kSize; ++i) {
    absl::StrAppend(&out, "---- ZooKeeper member ", i, " (port ", servers_[i]->port(), ") ----\n",
                    servers_[i]->Log());
  }
  return out;
}

}  // namespace lockd::testing
