// Internal: a client interceptor that sends `authorization: Bearer TOKEN`
// with every call of a channel (plaintext or TLS alike, unlike gRPC's call
// credentials, which need a secure channel). Thread-safe: the token is
// immutable.

#ifndef LOCKD_CLIENTS_CPP_SRC_BEARER_TOKEN_H_
#define LOCKD_CLIENTS_CPP_SRC_BEARER_TOKEN_H_

#include <memory>
#include <string>

#include "grpcpp/support/client_interceptor.h"

namespace lockd::client_internal {

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> NewBearerTokenInterceptor(
    std::string token);

}  // namespace lockd::client_internal

#endif  // LOCKD_CLIENTS_CPP_SRC_BEARER_TOKEN_H_
