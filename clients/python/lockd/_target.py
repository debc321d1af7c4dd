"""How a lockd address becomes a gRPC channel target, so that one Client
reaches several lockd replicas (lockd is stateless: any replica serves any
call) and gRPC's round_robin policy spreads calls over them. The same rules
as the C++ client (clients/cpp/src/target.h)."""

import json
import socket
from typing import List, Optional, Tuple

# round_robin over every address the target resolves to (gRPC's default,
# pick_first, would send everything to one replica).
ROUND_ROBIN_SERVICE_CONFIG = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})

_GRPC_SCHEMES = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "xds:",
                 "google-c2p:")


def _split_host_port(entry: str) -> Tuple[str, int]:
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0 or entry[close + 1:close + 2] != ":":
            raise ValueError("lockd address list entry %r: expected [ipv6]:port" % entry)
        host, port = entry[1:close], entry[close + 2:]
    else:
        host, sep, port = entry.rpartition(":")
        if not sep:
            raise ValueError("lockd address list entry %r: expected host:port" % entry)
        if ":" in host:
            raise ValueError("lockd address list entry %r: write an IPv6 host in brackets" % entry)
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError("lockd address list entry %r: expected host:port with a port in "
                         "[1, 65535]" % entry)
    return host, int(port)


def channel_target(address: str) -> Tuple[str, Optional[str]]:
    """(target, authority) for ``address``:

    * no comma, or a gRPC URI ("dns:///name:7411", "ipv4:a:p,b:p", "unix:..."):
      (address, None), unchanged;
    * "host1:port1,host2:port2,...": every entry is resolved now
      (socket.getaddrinfo, every address it has) and the list becomes
      "ipv4:a1:p1,a2:p2,..." (or "ipv6:[..]:p,..." with IPv4 written as
      IPv4-mapped when any address is IPv6); authority is the first entry as
      written (the :authority header, and the name TLS verifies unless
      server_name says otherwise). Host names are resolved once: for names
      whose addresses change use "dns:///name:port".

    Raises ValueError naming the entry for an empty entry, one without a
    port, or one that does not resolve.
    """
    if "," not in address or address.lower().startswith(_GRPC_SCHEMES):
        return address, None
    resolved: List[Tuple[int, str, int]] = []
    first = None
    for entry in (e.strip() for e in address.split(",")):
        if not entry:
            raise ValueError("lockd address list %r has an empty entry" % address)
        first = first or entry
        host, port = _split_host_port(entry)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise ValueError("lockd address list entry %r: cannot resolve: %s" % (entry, e)) from e
        for family, _, _, _, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            r = (family, sockaddr[0], port)
            if r not in resolved:
                resolved.append(r)
    any_v6 = any(family == socket.AF_INET6 for family, _, _ in resolved)
    if not any_v6:
        return "ipv4:" + ",".join("%s:%d" % (ip, port) for _, ip, port in resolved), first
    return "ipv6:" + ",".join(
        "[%s%s]:%d" % ("::ffff:" if family == socket.AF_INET else "", ip, port)
        for family, ip, port in resolved), first


def keepalive_window(keepalive_time: float, keepalive_timeout: float) -> float:
    """K = keepalive_time + keepalive_timeout (seconds): the longest a hung
    lockd (stopped, or cut off without a reset) goes unnoticed on a channel
    with these keepalive settings. Raises ValueError naming the argument for
    keepalive_time < 1.0 (lockd accepts a client's pings every 500 ms at
    most) or keepalive_timeout <= 0."""
    if not keepalive_time >= 1.0:
        raise ValueError("keepalive_time must be at least 1.0 seconds, not %r" % keepalive_time)
    if not keepalive_timeout > 0:
        raise ValueError("keepalive_timeout must be positive, not %r" % keepalive_timeout)
    return keepalive_time + keepalive_timeout


def channel_options(address: str, keepalive_time: float,
                    keepalive_timeout: float) -> Tuple[str, list]:
    """(target, grpc channel options) for a Client's own channel to
    ``address``: HTTP/2 keepalive pings every ``keepalive_time`` seconds,
    calls or not, and the connection (with its Session streams) closed when
    one goes unanswered for ``keepalive_timeout`` (see keepalive_window)."""
    keepalive_window(keepalive_time, keepalive_timeout)
    target, authority = channel_target(address)
    options = [("grpc.initial_reconnect_backoff_ms", 100),
               ("grpc.max_reconnect_backoff_ms", 2000),
               ("grpc.service_config", ROUND_ROBIN_SERVICE_CONFIG),
               ("grpc.service_config_disable_resolution", 1),
               ("grpc.keepalive_time_ms", int(keepalive_time * 1000)),
               ("grpc.keepalive_timeout_ms", max(1, int(keepalive_timeout * 1000))),
               # gRPC >= 1.5x times out an unanswered ping (keepalive's too)
               # with this, 1 minute by default, not with keepalive_timeout:
               # without it a hung lockd went unnoticed for 30 s and more
               # (grpcio 1.76, measured; 1.51 ignores the argument).
               ("grpc.http2.ping_timeout_ms", max(1, int(keepalive_timeout * 1000))),
               ("grpc.keepalive_permit_without_calls", 1),
               ("grpc.http2.max_pings_without_data", 0)]
    if authority:
        options.append(("grpc.default_authority", authority))
    return target, options


def open_channel(channels, address: str, credentials, server_name: Optional[str],
                 keepalive_time: float, keepalive_timeout: float, **extra):
    """A Client's own channel to ``address`` (channel_options): made by
    ``channels``, the grpc module (lockd.Client) or grpc.aio (lockd.aio),
    plaintext unless ``credentials``; ``server_name``: the name TLS
    verifies instead of the target's host. ``extra``: more keyword
    arguments of the channel (grpc.aio's interceptors)."""
    target, options = channel_options(address, keepalive_time, keepalive_timeout)
    if credentials is None:
        return channels.insecure_channel(target, options=options, **extra)
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    return channels.secure_channel(target, credentials, options=options, **extra)
