// A process's resident memory and thread count, from /proc/PID/status (the
// waiters and holders scenarios read lockd's with --lockd-pid).

#ifndef LOCKD_TOOLS_LOCKBENCH_PROC_STATUS_H_
#define LOCKD_TOOLS_LOCKBENCH_PROC_STATUS_H_

#include <cstdint>

namespace lockd::bench {

struct ProcSample {
  int64_t rss_kb = -1;   // VmRSS; -1: not read
  int64_t threads = -1;  // Threads; -1: not read
};

// The current sample of process `pid`; both -1 when pid <= 0 or the file
// cannot be read (the process is gone or not ours to read).
ProcSample ReadProc(int pid);

// The larger of each field of `a` and `b`.
ProcSample MaxOf(const ProcSample& a, const ProcSample& b);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_PROC_STATUS_H_
