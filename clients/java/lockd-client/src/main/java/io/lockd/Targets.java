package io.lockd;

import io.grpc.Attributes;
import io.grpc.ChannelCredentials;
import io.grpc.EquivalentAddressGroup;
import io.grpc.NameResolver;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;

/**
 * Turns a client's target into a channel builder: a gRPC target ({@code dns:///name:port},
 * {@code host:port}) as it is, or a comma-separated list of replicas whose names are resolved
 * once, here, and balanced over by the channel (the list's first entry is the authority TLS
 * verifies). Stateless; thread-safe.
 */
final class Targets {
  private Targets() {}

  interface Target {
    NettyChannelBuilder builder(ChannelCredentials creds);
  }

  /**
   * @throws IllegalArgumentException an empty entry, an entry without a port, an unresolvable
   *     name (each named)
   */
  static Target parse(String target) {
    String t = target.trim();
    if (!t.contains(",")) {
      return creds -> NettyChannelBuilder.forTarget(t, creds);
    }
    List<InetSocketAddress> addresses = new ArrayList<>();
    for (String entry : t.split(",", -1)) {
      addresses.add(address(entry.trim()));
    }
    String authority = t.split(",")[0].trim();
    return creds -> listBuilder(addresses, authority, creds);
  }

  static InetSocketAddress address(String entry) {
    if (entry.isEmpty()) {
      throw new IllegalArgumentException("target: empty entry in the address list");
    }
    int colon = entry.lastIndexOf(':');
    if (colon < 0 || (entry.startsWith("[") && !entry.substring(0, colon).endsWith("]"))) {
      throw new IllegalArgumentException("target: entry '" + entry + "' has no port");
    }
    String host = entry.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    int port;
    try {
      port = Integer.parseInt(entry.substring(colon + 1));
    } catch (NumberFormatException e) {
      port = -1;
    }
    if (port <= 0 || port > 65535) {
      throw new IllegalArgumentException("target: entry '" + entry + "' has a bad port");
    }
    try {
      return new InetSocketAddress(InetAddress.getByName(host), port);
    } catch (UnknownHostException e) {
      throw new IllegalArgumentException("target: cannot resolve '" + entry + "'", e);
    }
  }

  // nameResolverFactory is deprecated in favour of a global NameResolverRegistry; a resolver
  // private to this channel keeps the list from leaking into the process's registry.
  @SuppressWarnings("deprecation")
  private static NettyChannelBuilder listBuilder(
      List<InetSocketAddress> addresses, String authority, ChannelCredentials creds) {
    return NettyChannelBuilder.forTarget("lockd-list:///" + authority, creds)
        .nameResolverFactory(new NameResolver.Factory() {
          @Override
          public NameResolver newNameResolver(URI uri, NameResolver.Args args) {
            return new NameResolver() {
              @Override
              public String getServiceAuthority() {
                return authority;
              }

              @Override
              public void start(Listener2 listener) {
                List<EquivalentAddressGroup> groups = new ArrayList<>();
                for (InetSocketAddress a : addresses) {
                  groups.add(new EquivalentAddressGroup(a));
                }
                listener.onResult(ResolutionResult.newBuilder().setAddresses(groups)
                    .setAttributes(Attributes.EMPTY).build());
              }

              @Override
              public void shutdown() {}
            };
          }

          @Override
          public String getDefaultScheme() {
            return "lockd-list";
          }
        });
  }
}
