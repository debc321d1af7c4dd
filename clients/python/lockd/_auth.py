"""Credentials for lockd.Client: TLS (with client certificates) and bearer
tokens sent as ``authorization: Bearer TOKEN`` metadata on every call."""

import collections
import os
from typing import Optional

import grpc


def tls_credentials(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                    key_file: Optional[str] = None) -> grpc.ChannelCredentials:
    """grpc.ChannelCredentials from PEM files: ``ca_file`` signs the server's
    certificate (default: gRPC's roots); ``cert_file`` and ``key_file`` (both
    or neither) are the client certificate for mutual TLS. Raises ValueError
    naming a file that cannot be read (never its contents)."""
    if (cert_file is None) != (key_file is None):
        raise ValueError("cert_file and key_file must be given together")

    def read(path: Optional[str]) -> Optional[bytes]:
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise ValueError(f"cannot read TLS file {path}: {e.strerror}") from None

    return grpc.ssl_channel_credentials(root_certificates=read(ca_file),
                                        private_key=read(key_file),
                                        certificate_chain=read(cert_file))


def bearer_token(token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    """A Client's bearer token: ``token``, else $LOCKD_AUTH_TOKEN, else the
    first line of ``token_file`` or $LOCKD_AUTH_TOKEN_FILE; None for none."""
    token = token or os.environ.get("LOCKD_AUTH_TOKEN")
    token_file = token_file or os.environ.get("LOCKD_AUTH_TOKEN_FILE")
    if not token and token_file:
        token = read_token_file(token_file)
    return token or None


def read_token_file(path: str) -> str:
    """The first line of ``path``. Raises ValueError naming the file."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            token = f.readline().strip()
    except OSError as e:
        raise ValueError(f"cannot read bearer token file {path}: {e.strerror}") from None
    if not token:
        raise ValueError(f"bearer token file {path} is empty")
    return token


class _Details(collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready",
                     "compression")), grpc.ClientCallDetails):
    pass


class BearerTokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                             grpc.StreamUnaryClientInterceptor,
                             grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer TOKEN`` to every call. The token is never
    logged."""

    def __init__(self, token: str):
        self._header = ("authorization", "Bearer " + token)

    def __repr__(self) -> str:
        return "BearerTokenInterceptor(<redacted>)"

    def _details(self, d):
        metadata = list(d.metadata or [])
        metadata.append(self._header)
        return _Details(d.method, d.timeout, metadata, d.credentials,
                        getattr(d, "wait_for_ready", None), getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)


def aio_bearer_interceptors(token: str) -> list:
    """grpc.aio interceptors adding ``authorization: Bearer TOKEN`` to every
    call of a lockd.aio.Client (unary and the Session stream)."""
    header = ("authorization", "Bearer " + token)

    def details(d):
        return d._replace(metadata=grpc.aio.Metadata(*(tuple(d.metadata or ()) + (header,))))

    class UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):
        async def intercept_unary_unary(self, continuation, client_call_details, request):
            return await continuation(details(client_call_details), request)

    class StreamStream(grpc.aio.StreamStreamClientInterceptor):
        async def intercept_stream_stream(self, continuation, client_call_details,
                                          request_iterator):
            return await continuation(details(client_call_details), request_iterator)

    return [UnaryUnary(), StreamStream()]
