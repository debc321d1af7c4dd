#include "tests/support/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace lockd::testing {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const std::vector<std::string>& argv, const std::string& log_path,
    const std::map<std::string, std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string name = kv.substr(0, kv.find('='));
    if (env.count(name) == 0) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const auto& e : env_strings) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open ", log_path));
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    // Child: die with the test process; own process group for clean kills.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(127);
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvpe(cargv[0], cargv.data(), cenv.data());
    const char msg[] = "exec failed\n";
    ssize_t unused = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)unused;
    _exit(127);
  }
  ::close(fd);
  std::unique_ptr<Subprocess> p(new Subprocess());
  p->pid_ = pid;
  p->log_path_ = log_path;
  return p;
}

Subprocess::~Subprocess() {
  if (Running()) Kill();
}

std::string Subprocess::Log() const { return ReadFileOrEmpty(log_path_); }

bool Subprocess::Running() {
  if (exited_) return false;
  int status;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exited_ = true;
    status_ = status;
    return false;
  }
  return true;
}

void Subprocess::Signal(int sig) {
  if (Running()) ::kill(pid_, sig);
}

int Subprocess::Wait(absl::Duration timeout) {
  if (WaitFor([this] { return !Running(); }, timeout, absl::Milliseconds(5))) return status_;
  return -1;
}

int Subprocess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  int status = Wait(grace);
  if (status != -1) return status;
  Kill();
  return status_;
}

void Subprocess::Kill() {
  if (exited_) return;
  ::kill(pid_, SIGKILL);
  int status;
  if (::waitpid(pid_, &status, 0) == pid_) status_ = status;
  exited_ = true;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return 0;
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

bool CanConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

bool WaitFor(const std::function<bool()>& cond, absl::Duration timeout, absl::Duration step) {
  absl::Time end = absl::Now() + timeout;
  while (true) {
    if (cond()) return true;
    if (absl::Now() >= end) return false;
    absl::SleepFor(step);
  }
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/lockd-test-XXXXXX");
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* p = ::mkdtemp(buf.data());
  path_ = p != nullptr ? p : "";
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string FindExecutable(const std::vector<std::string>& candidates) {
  const char* path_env = std::getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path_env != nullptr ? path_env : "/usr/bin:/bin", ':', absl::SkipEmpty());
  dirs.push_back("/usr/sbin");
  dirs.push_back("/sbin");
  for (const std::string& c : candidates) {
    if (c.find('/') != std::string::npos) {
      if (::access(c.c_str(), X_OK) == 0) return c;
      continue;
    }
    for (const std::string& d : dirs) {
      std::string full = absl::StrCat(d, "/", c);
      if (::access(full.c_str(), X_OK) == 0) return full;
    }
  }
  return "";
}

}  // namespace lockd::testing
