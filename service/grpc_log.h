// gRPC's own log lines (a refused TLS handshake, a bad HTTP/2 frame) written
// through lockd's logger (util/log.h), so that they follow log.format like
// every other line instead of gRPC's plain "E1127 12:00:00.000 ..." text.

#ifndef LOCKD_SERVICE_GRPC_LOG_H_
#define LOCKD_SERVICE_GRPC_LOG_H_

#include "util/log.h"

namespace lockd {

// From now on every gRPC log line becomes a lockd line at its severity
// (gRPC's ERROR, INFO, DEBUG as error, info, debug) with the fields
// `logger=grpc` and `source=<gRPC source file>:<line>`. Unless the
// GRPC_VERBOSITY environment variable chooses, gRPC logs its ERROR lines,
// and its INFO lines too when `level` is kDebug (its DEBUG lines are
// tracing). Call once, early in main() (before gRPC starts), after
// SetLogFormat/SetLogLevel. Thread-safe afterwards.
void RouteGrpcLogs(LogLevel level);

}  // namespace lockd

#endif  // LOCKD_SERVICE_GRPC_LOG_H_
