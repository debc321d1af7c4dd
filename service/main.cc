// lockd: the distributed lock service binary. See `lockd --help`.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "service/backend_factory.h"
#include "service/config.h"
#include "service/grpc_log.h"
#include "service/server.h"
#include "util/log.h"
#include "util/version.h"

extern char** environ;

int main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock
  // detector on: every lock/unlock in lockd and in gRPC (whose mutexes are
  // absl::Mutex) updates a global graph under a global lock, 17% of lockd's
  // user-space instructions per RPC (callgrind, bench/RESULTS.md). The tests
  // keep it on (they do not run this main), so lock-order bugs still abort
  // there; the server binary runs without it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos && kv.rfind("LOCKD_", 0) == 0)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  absl::StatusOr<lockd::ParsedArgs> parsed = lockd::ParseConfig(args, env);
  if (!parsed.ok()) {
    std::cerr << "lockd: " << parsed.status().message() << "\n(see lockd --help)\n";
    return 2;
  }
  if (parsed->help) {
    std::cout << lockd::HelpText();
    return 0;
  }
  if (parsed->version) {
    std::cout << lockd::VersionLine("lockd") << "\n";
    return 0;
  }
  const lockd::Config& config = parsed->config;
  lockd::LogLevel level = lockd::LogLevel::kInfo;
  if (lockd::ParseLogLevel(config.log_level, &level)) lockd::SetLogLevel(level);
  lockd::LogFormat format;
  if (lockd::ParseLogFormat(config.log.format, &format)) lockd::SetLogFormat(format);
  lockd::RouteGrpcLogs(level);

  // Signals are taken by a sigwait() below, so block them in every thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<lockd::Backend>> backend = lockd::StartBackendFromConfig(config);
  if (!backend.ok()) {
    lockd::LogError("cannot start backend ", config.backend, ": ", backend.status().message());
    return backend.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  absl::StatusOr<std::unique_ptr<lockd::LockdServer>> server =
      lockd::LockdServer::Start(config, *std::move(backend));
  if (!server.ok()) {
    lockd::LogError(server.status().message());
    return 1;
  }
  lockd::LogInfo("lockd serving on ", (*server)->address(), " backend=", config.backend,
                 " version=", lockd::Version(), " revision=", lockd::Revision());

  int sig = 0;
  sigwait(&signals, &sig);
  lockd::LogInfo("received ", sig == SIGTERM ? "SIGTERM" : "SIGINT", "; shutting down");
  (*server)->Shutdown(config.shutdown_grace);
  lockd::LogInfo("lockd stopped");
  return 0;
}
