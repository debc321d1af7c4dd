// The runner's side of the history: turns what workers and the nemesis do
// into history events (c24-check's format), keeps them, writes them out and
// has them checked.
//
// Not thread-safe: the runner calls it under its mutex.

#ifndef LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_SINK_H_
#define LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_SINK_H_

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tools/lockctl/verify/referee.h"
#include "tools/lockctl/verify/worker.h"

namespace lockd::lockctl::verify {

struct VerifyOptions;

class HistorySink {
 public:
  void Start(int64_t now, const VerifyOptions& options);
  void AcquireInvoke(int64_t now, int process, const Op& op, bool session, absl::Duration ttl);
  void AcquireOk(int64_t now, int process, uint64_t op_id, const std::vector<uint64_t>& tokens,
                 bool session, int64_t valid_until);
  void AcquireFail(int64_t now, int process, uint64_t op_id, const std::string& code,
                   bool uncertain, const std::string& message);
  void AcquireInfo(int64_t now, int process, uint64_t op_id, const std::string& why);
  void Enter(int64_t now, int process, const std::string& name, uint64_t token, OpKind kind,
             uint32_t limit, uint32_t permits, int64_t valid_until);
  void Read(int64_t now, int process, const std::string& name, uint64_t token, int64_t fenced,
            int64_t unfenced);
  void Write(int64_t now, int process, const std::string& name, uint64_t token, int64_t fenced,
             int64_t unfenced, bool accepted);
  void Exit(int64_t now, int process, const std::string& name, bool crashed);
  void ReleaseInvoke(int64_t now, int process, uint64_t op_id, const Op& op,
                     const std::vector<uint64_t>& tokens);
  void ReleaseDone(int64_t now, int process, uint64_t op_id, const std::string& code,
                   const std::string& message);
  void ReleaseInfo(int64_t now, int process, uint64_t op_id, const std::string& why);
  void Nemesis(int64_t now, const std::string& what, int process, const Op& op);
  void Finish(int64_t now, const std::map<std::string, Referee::Counters>& counters, int cleaned);

  absl::Status WriteTo(const std::string& path) const;
  // Checks the history and prints the report; returns the exit code.
  int Report(bool json, std::ostream& out) const;

 private:
  std::vector<std::string> lines_;
  int64_t grants_ = 0, fails_ = 0, stale_ = 0;
};

}  // namespace lockd::lockctl::verify

#endif  // LOCKD_TOOLS_LOCKCTL_VERIFY_HISTORY_SINK_H_
