#include "clients/cpp/src/bearer_token.h"

#include <utility>

#include "grpcpp/support/interceptor.h"

namespace lockd::client_internal {
namespace {

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;  // owned by the factory, which outlives the channel's calls
};

class Factory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit Factory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> NewBearerTokenInterceptor(
    std::string token) {
  return std::make_unique<Factory>(std::move(token));
}

}  // namespace lockd::client_internal
