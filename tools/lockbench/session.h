// lockbench over lockd's Session stream (docs/api.md "Sessions"): the
// messages a client writes and how it reads the answers, shared by the
// blocking Locker, the event-loop driver and the waiters scenario.
//
// A lockbench session acts for one owner (the client's) with one lease (the
// run's --lease, renewed by the server while the stream is open); requests
// leave owner and namespace empty, so the session's apply. Functions here are
// thread-compatible (no shared state).

#ifndef LOCKD_TOOLS_LOCKBENCH_SESSION_H_
#define LOCKD_TOOLS_LOCKBENCH_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "lockd/v1/lock.grpc.pb.h"
#include "tools/lockbench/locker.h"

namespace lockd::bench {

// The first message of a session: namespace `ns`, `owner`, `lease`.
void SetOpen(const std::string& ns, const std::string& owner, absl::Duration lease,
             v1::SessionRequest* req);
// An acquire of `name` waiting up to `wait` (zero: try once), as op `op_id`.
void SetAcquire(uint64_t op_id, const std::string& name, absl::Duration wait,
                v1::SessionRequest* req);
// A release of `name`, as op `op_id`.
void SetRelease(uint64_t op_id, const std::string& name, v1::SessionRequest* req);

// OK if `resp` is `opened`; else an error saying what came instead.
absl::Status CheckOpened(const v1::SessionResponse& resp);

// The outcome of op `op_id` (an acquire if `acquire`, else a release) that
// `resp` answers: its result.status when not OK (prefixed with "Session
// Acquire"/"Session Release", like a failed unary call), INTERNAL if `resp`
// answers another op or is not a result, ABORTED for `lost` (no benchmark
// client lets a hold lapse, so a lost hold means the run is invalid).
absl::StatusOr<AcquireOutcome> ResultOf(const v1::SessionResponse& resp, uint64_t op_id,
                                        bool acquire);

// A status from the end of a stream (Finish), prefixed with "Session: ".
absl::Status StreamStatus(const grpc::Status& s);

// A Locker over one Session stream on `channel`, opened (open sent, opened
// read) before it is returned: every Acquire/Release writes one op and reads
// its result (one op outstanding). Acquire's `owner` and `lease` must be the
// session's (`owner`, `lease`); they are not sent again. Close() half-closes
// and returns the stream's final status (OK: the server released the
// session's holds). Errors: the status of the failed open.
absl::StatusOr<std::unique_ptr<Locker>> NewSessionLocker(std::shared_ptr<grpc::Channel> channel,
                                                         const std::string& ns,
                                                         const std::string& owner,
                                                         absl::Duration lease);

}  // namespace lockd::bench

#endif  // LOCKD_TOOLS_LOCKBENCH_SESSION_H_
