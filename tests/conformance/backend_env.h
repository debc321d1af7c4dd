// How the conformance suite reaches a backend. Each conformance binary links
// exactly one <backend>_env.cc, which defines MakeBackendEnv(): it starts the
// real server the backend needs (on a free loopback port, in a temporary
// directory) and says which lockd flags select it. The suite then builds the
// backend through the same configuration path as the lockd binary.

#ifndef LOCKD_TESTS_CONFORMANCE_BACKEND_ENV_H_
#define LOCKD_TESTS_CONFORMANCE_BACKEND_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace lockd::testing {

class BackendEnv {
 public:
  virtual ~BackendEnv() = default;

  // "memory", "redis", "mysql" or "zookeeper".
  virtual std::string name() const = 0;

  // Starts the server; called once, before the first test. An error fails
  // every test of the binary with that message.
  virtual absl::Status SetUp() = 0;
  // Stops the server; called once after the last test.
  virtual void TearDown() {}

  // lockd flags (e.g. {"--backend=redis", "--redis.addresses=127.0.0.1:4711",
  // "--redis.key_prefix=t3"}) that select this backend and server.
  // `isolation` ([a-z0-9_]{1,32}) keeps tests apart: backends configured with
  // different values never see each other's locks (key prefix, root znode,
  // table prefix); the same value means the same locks (several replicas).
  virtual std::vector<std::string> Flags(const std::string& isolation) const = 0;

  // True when several lockd processes may share the backend (all but memory).
  virtual bool multi_replica() const { return true; }

  // How long after the last of several replicas started they all see each
  // other: for backends whose queue a replica writes only beside others
  // (docs/backends.md "Waiting across replicas"), a test of several
  // replicas starts after it.
  virtual absl::Duration replica_settle() const { return absl::ZeroDuration(); }
};

// Defined by the <backend>_env.cc linked into the binary.
std::unique_ptr<BackendEnv> MakeBackendEnv();

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_CONFORMANCE_BACKEND_ENV_H_
