package io.lockd;

import io.grpc.MethodDescriptor;
import io.grpc.MethodDescriptor.MethodType;
import io.grpc.protobuf.ProtoUtils;
import io.lockd.v1.AcquireAllRequest;
import io.lockd.v1.AcquireAllResponse;
import io.lockd.v1.AcquireRequest;
import io.lockd.v1.AcquireResponse;
import io.lockd.v1.DescribeRequest;
import io.lockd.v1.ForceReleaseRequest;
import io.lockd.v1.ForceReleaseResponse;
import io.lockd.v1.LockInfo;
import io.lockd.v1.ReleaseRequest;
import io.lockd.v1.ReleaseResponse;
import io.lockd.v1.RenewRequest;
import io.lockd.v1.RenewResponse;
import io.lockd.v1.SessionRequest;
import io.lockd.v1.SessionResponse;

/**
 * The methods of {@code lockd.v1.LockService} (protos/lockd/v1/lock.proto) as gRPC method
 * descriptors over the generated message classes. Declared here rather than taken from a
 * generated {@code LockServiceGrpc}, so the client needs only protoc's Java messages (Maven
 * Central serves no protoc-gen-grpc-java binary for this platform). Constants; thread-safe.
 */
final class Rpc {
  private Rpc() {}

  static final String SERVICE = "lockd.v1.LockService";

  static final MethodDescriptor<AcquireRequest, AcquireResponse> ACQUIRE =
      unary("Acquire", AcquireRequest.getDefaultInstance(), AcquireResponse.getDefaultInstance());
  static final MethodDescriptor<AcquireAllRequest, AcquireAllResponse> ACQUIRE_ALL =
      unary(
          "AcquireAll",
          AcquireAllRequest.getDefaultInstance(),
          AcquireAllResponse.getDefaultInstance());
  static final MethodDescriptor<ReleaseRequest, ReleaseResponse> RELEASE =
      unary("Release", ReleaseRequest.getDefaultInstance(), ReleaseResponse.getDefaultInstance());
  static final MethodDescriptor<RenewRequest, RenewResponse> RENEW =
      unary("Renew", RenewRequest.getDefaultInstance(), RenewResponse.getDefaultInstance());
  static final MethodDescriptor<DescribeRequest, LockInfo> DESCRIBE =
      unary("Describe", DescribeRequest.getDefaultInstance(), LockInfo.getDefaultInstance());
  static final MethodDescriptor<ForceReleaseRequest, ForceReleaseResponse> FORCE_RELEASE =
      unary(
          "ForceRelease",
          ForceReleaseRequest.getDefaultInstance(),
          ForceReleaseResponse.getDefaultInstance());
  static final MethodDescriptor<SessionRequest, SessionResponse> SESSION =
      MethodDescriptor.<SessionRequest, SessionResponse>newBuilder()
          .setType(MethodType.BIDI_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, "Session"))
          .setRequestMarshaller(ProtoUtils.marshaller(SessionRequest.getDefaultInstance()))
          .setResponseMarshaller(ProtoUtils.marshaller(SessionResponse.getDefaultInstance()))
          .build();

  private static <Q extends com.google.protobuf.Message, R extends com.google.protobuf.Message>
      MethodDescriptor<Q, R> unary(String name, Q request, R response) {
    return MethodDescriptor.<Q, R>newBuilder()
        .setType(MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(ProtoUtils.marshaller(request))
        .setResponseMarshaller(ProtoUtils.marshaller(response))
        .build();
  }
}
