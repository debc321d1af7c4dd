// lockctl's --output json: the client library's results as the lockd.v1
// messages the server sent, printed in proto3 JSON by protobuf's own printer
// (google::protobuf::util::MessageToJsonString), as grpcurl prints them:
// field names in lowerCamelCase, 64-bit integers as strings, durations as
// "29.950s", enums by name. Fields at their default value are printed too
// (grpcurl -emit-defaults), so that a script finds "held": false rather than
// no key; an unset message field (a free lock's ttlRemaining) is left out.
//
// Pure functions; thread-safe.

#ifndef LOCKD_TOOLS_LOCKCTL_PROTO_JSON_H_
#define LOCKD_TOOLS_LOCKCTL_PROTO_JSON_H_

#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "lockd/client.h"
#include "lockd/v1/lock.pb.h"

namespace lockd::lockctl {

// `message` as one line of proto3 JSON, without a trailing newline.
std::string ProtoJson(const google::protobuf::Message& message);

// The messages lockd answered with, rebuilt from the client's results.
// Durations are set only when positive, as lockd sets them (a free lock has
// no ttl_remaining).
v1::LockInfo ToProto(const LockInfo& info);
v1::AcquireResponse AcquiredResponse(const Lease& lease);
v1::AcquireResponse NotAcquiredResponse(const LockInfo* current);  // current: null if unknown
v1::ReleaseResponse ToProto(const ReleaseOutcome& outcome);
v1::RenewResponse ToProto(const RenewOutcome& outcome);
v1::ListResponse ToListResponse(const std::vector<LockInfo>& locks);
v1::ForceReleaseResponse ToProto(const ForceReleaseOutcome& outcome);

}  // namespace lockd::lockctl

#endif  // LOCKD_TOOLS_LOCKCTL_PROTO_JSON_H_
