#include "service/grpc_log.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpc/support/log.h"

namespace lockd {
namespace {

void LogGrpcLine(gpr_log_func_args* args) {
  LogLevel level = LogLevel::kError;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = LogLevel::kDebug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = LogLevel::kInfo;
  absl::string_view file = args->file != nullptr ? args->file : "?";
  std::string source = absl::StrCat(absl::StripPrefix(file, "./"), ":", args->line);
  LogFields(level, args->message != nullptr ? args->message : "",
            {{"logger", "grpc"}, {"source", source}});
}

}  // namespace

void RouteGrpcLogs(LogLevel level) {
  if (std::getenv("GRPC_VERBOSITY") == nullptr) {
    gpr_set_log_verbosity(level == LogLevel::kDebug ? GPR_LOG_SEVERITY_INFO
                                                    : GPR_LOG_SEVERITY_ERROR);
  }
  gpr_set_log_function(LogGrpcLine);
}

}  // namespace lockd
