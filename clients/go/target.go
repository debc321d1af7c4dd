package lockd

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// dialTarget turns New's target into a gRPC target. A gRPC URI
// ("dns:///lockd:7411", "ipv4:...", "unix:...") or one address passes
// unchanged; a comma-separated list "host1:7411,host2:7411,[::1]:7411"
// becomes a resolver of those addresses (host names resolved when
// connecting), its first entry being the authority TLS verifies. Every
// target is balanced round robin over the addresses it resolves to.
func dialTarget(target string) (string, []grpc.DialOption, error) {
	target = strings.TrimSpace(target)
	if target == "" {
		return "", nil, fmt.Errorf("lockd: empty target")
	}
	if !strings.Contains(target, ",") || strings.Contains(target, "://") || hasScheme(target) {
		return target, nil, nil
	}
	var addrs []resolver.Address
	for _, entry := range strings.Split(target, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return "", nil, fmt.Errorf("lockd: address list %q has an empty entry", target)
		}
		host, port, err := net.SplitHostPort(entry)
		if err != nil {
			return "", nil, fmt.Errorf("lockd: address list entry %q: expected host:port ([ipv6]:port)", entry)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || host == "" {
			return "", nil, fmt.Errorf("lockd: address list entry %q: expected host:port with a port in [1, 65535]", entry)
		}
		addrs = append(addrs, resolver.Address{Addr: entry})
	}
	r := manual.NewBuilderWithScheme("lockd-list")
	r.InitialState(resolver.State{Addresses: addrs})
	return r.Scheme() + ":///" + addrs[0].Addr,
		[]grpc.DialOption{grpc.WithResolvers(r), grpc.WithAuthority(addrs[0].Addr)}, nil
}

func hasScheme(target string) bool {
	for _, s := range []string{"dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "passthrough:", "xds:"} {
		if strings.HasPrefix(strings.ToLower(target), s) {
			return true
		}
	}
	return false
}
