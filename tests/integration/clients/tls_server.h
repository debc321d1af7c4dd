// Test helper: the real LockService (memory backend) served in-process over
// TLS, with a self-signed certificate for "lockd.test" made by openssl(1) in
// a temporary directory. lockd itself serves plaintext; this checks the
// clients' TLS options against a real TLS endpoint. Not thread-safe.

#ifndef LOCKD_TESTS_INTEGRATION_CLIENTS_TLS_SERVER_H_
#define LOCKD_TESTS_INTEGRATION_CLIENTS_TLS_SERVER_H_

#include <sys/wait.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/memory/memory_backend.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "service/lock_service.h"
#include "tests/support/process.h"

namespace lockd::testing {

class TlsLockServer {
 public:
  // Writes <dir>/cert.pem and <dir>/key.pem and serves on 127.0.0.1.
  static absl::StatusOr<std::unique_ptr<TlsLockServer>> Start(const std::string& dir) {
    auto s = std::unique_ptr<TlsLockServer>(new TlsLockServer());
    s->cert_file_ = absl::StrCat(dir, "/cert.pem");
    std::string key_file = absl::StrCat(dir, "/key.pem");
    absl::StatusOr<std::unique_ptr<Subprocess>> openssl =
        Subprocess::Start({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                           "-subj", "/CN=lockd.test", "-addext", "subjectAltName=DNS:lockd.test",
                           "-keyout", key_file, "-out", s->cert_file_},
                          absl::StrCat(dir, "/openssl.log"));
    if (!openssl.ok()) return openssl.status();
    int status = (*openssl)->Wait(absl::Seconds(60));
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return absl::InternalError(absl::StrCat("openssl failed: ", (*openssl)->Log()));
    }
    absl::StatusOr<std::unique_ptr<Backend>> backend = NewMemoryBackend(MemoryOptions());
    if (!backend.ok()) return backend.status();
    s->backend_ = *std::move(backend);
    s->service_ = std::make_unique<LockServiceImpl>(s->backend_.get(), LeaseBounds());
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({ReadFileOrEmpty(key_file), ReadFileOrEmpty(s->cert_file_)});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &s->port_);
    builder.RegisterService(s->service_.get());
    s->server_ = builder.BuildAndStart();
    if (s->server_ == nullptr || s->port_ == 0) return absl::InternalError("TLS server failed");
    return s;
  }

  ~TlsLockServer() {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
    if (backend_ != nullptr) backend_->Shutdown();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  const std::string& cert_file() const { return cert_file_; }

 private:
  TlsLockServer() = default;
  std::string cert_file_;
  int port_ = 0;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<LockServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace lockd::testing

#endif  // LOCKD_TESTS_INTEGRATION_CLIENTS_TLS_SERVER_H_
