// TLS for the gRPC port (`tls.*` options): gRPC's file-watching certificate
// provider re-reads the certificate, key and client CA files every
// `tls.reload_interval`, so replacing them (as a Kubernetes Secret volume
// does) rotates them for new connections without a restart.

#ifndef LOCKD_SERVICE_TLS_H_
#define LOCKD_SERVICE_TLS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "service/config.h"

namespace lockd {

// Insecure credentials when tls.cert_file is empty; otherwise TLS with the
// client-certificate policy of tls.client_auth (none: not asked; request:
// verified against tls.client_ca_file when sent; require: mutual TLS).
// Checks now that the files hold a PEM certificate, a PEM private key and
// PEM CA certificates: kInvalidArgument naming the option otherwise (never
// echoing a key).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> NewServerCredentials(
    const Config::Tls& tls);

// The notAfter time of the first certificate in the PEM file `path`.
// kInvalidArgument if it cannot be read or parsed.
absl::StatusOr<absl::Time> CertificateNotAfter(const std::string& path);

}  // namespace lockd

#endif  // LOCKD_SERVICE_TLS_H_
