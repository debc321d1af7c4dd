package io.lockd;

import io.grpc.CallCredentials;
import io.grpc.CallOptions;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.lockd.v1.AcquireAllRequest;
import io.lockd.v1.AcquireAllResponse;
import io.lockd.v1.AcquireRequest;
import io.lockd.v1.AcquireResponse;
import io.lockd.v1.DescribeRequest;
import io.lockd.v1.ForceReleaseRequest;
import io.lockd.v1.ForceReleaseResponse;
import io.lockd.v1.LockInfo;
import io.lockd.v1.LockServiceGrpc;
import io.lockd.v1.ReleaseRequest;
import io.lockd.v1.ReleaseResponse;
import io.lockd.v1.RenewRequest;
import io.lockd.v1.RenewResponse;
import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * A connection to lockd: leased, fenced locks as {@code java.util.concurrent.locks} objects.
 *
 * <pre>{@code
 * try (LockdClient client = LockdClient.builder().target("127.0.0.1:7411").build()) {
 *   LockdLock lock = client.getLock("orders/42");
 *   try (LockdLock.Guard held = lock.acquire()) {
 *     charge(order, held.fencingToken());
 *   }
 * }
 * }</pre>
 *
 * <p><b>One session.</b> A client holds its locks over ONE Session stream (docs/api.md
 * "Sessions"), opened by its first acquire with the client's owner id; the server renews every
 * hold while the stream is up, and the channel's HTTP/2 keepalive notices a replica that hangs.
 * When the stream breaks it is reopened (on another replica when the target names several) and
 * resumes every hold; meanwhile a hold stays valid until 2/3 of its lease minus the drift after
 * the server was last known alive ({@link LeaseValidity}), then it is lost and its listeners
 * run. Acquires with another owner, with autoRenew off, or with a lease too short to outlast a
 * hang take the unary RPCs, renewed every ttl/3 by the client's watchdog ({@link AcquirePath}).
 *
 * <p><b>No hold left behind.</b> An acquire whose outcome the client did not learn (deadline,
 * interrupt, broken connection) is undone with Release{acquire_request_id} (docs/api.md
 * "Uncertain outcomes") before it is retried or its failure reported.
 *
 * <p><b>Owners.</b> The server sees one owner per client ({@link Builder#clientId}). The lock
 * objects add the thread: a {@link LockdLock} is held by one thread of this client at a time and
 * is reentrant for that thread, so threads of one client exclude each other as two clients do.
 *
 * <p>Thread-safe. {@link #close()} half-closes the session (the server releases every hold) and
 * shuts the channel down.
 */
public final class LockdClient implements AutoCloseable {
  /** Options, fixed at build. */
  static final class Config {
    String target;
    String owner;
    String namespace = "";
    Duration rpcTimeout = Duration.ofSeconds(10);
    Duration releaseTimeout = Duration.ofSeconds(2);
    Duration leaseTtl = Duration.ZERO;
    Duration keepaliveTime = Duration.ofSeconds(10);
    Duration keepaliveTimeout = Duration.ofSeconds(2);
    double clockDriftFactor = 0.01;
    Duration minClockDrift = Duration.ofMillis(2);
    boolean useSessions = true;
    boolean keepOnDisconnect = true;
    File caFile;
    File certFile;
    File keyFile;
    boolean tls;
    String serverName;
    String bearerToken;

    Duration hangBound() {
      return LeaseValidity.hangBound(keepaliveTime, keepaliveTimeout);
    }

    Duration drift(Duration ttl) {
      return LeaseValidity.drift(ttl, clockDriftFactor, minClockDrift);
    }
  }

  /** Options of a {@link LockdClient}. Not thread-safe. */
  public static final class Builder {
    private final Config c = new Config();

    private Builder() {}

    /**
     * Where lockd is: any gRPC target ({@code "dns:///lockd-headless:7411"} balances over every
     * address of the name) or a comma-separated list of replicas
     * ({@code "10.0.0.1:7411,10.0.0.2:7411"}, names resolved once, here). Calls are balanced
     * round-robin; a replica that is down gets none.
     */
    public Builder target(String target) {
      c.target = Objects.requireNonNull(target, "target");
      return this;
    }

    /** {@link #target(String)} of a list of replicas. */
    public Builder addresses(List<String> hostPorts) {
      return target(String.join(",", hostPorts));
    }

    /** TLS with the JVM's default roots. */
    public Builder tls() {
      c.tls = true;
      return this;
    }

    /** TLS with the roots in {@code caFile} (PEM). */
    public Builder tls(File caFile) {
      c.tls = true;
      c.caFile = caFile;
      return this;
    }

    /** Mutual TLS: this client's certificate chain and key (PEM). Implies TLS. */
    public Builder clientCertificate(File certFile, File keyFile) {
      c.tls = true;
      c.certFile = certFile;
      c.keyFile = keyFile;
      return this;
    }

    /** The name to verify in the server's certificate instead of the target's host. */
    public Builder serverName(String serverName) {
      c.serverName = serverName;
      return this;
    }

    /** Sent as {@code authorization: Bearer <token>} with every call; never logged. */
    public Builder bearerToken(String token) {
      c.bearerToken = token;
      return this;
    }

    /**
     * The owner id lockd sees for this client's holds (1-256 bytes). Default:
     * {@code <host>-<pid>-<random>}, unique per client.
     */
    public Builder clientId(String owner) {
      c.owner = owner;
      return this;
    }

    /** Namespace of every lock of this client that names none; default lockd's "default". */
    public Builder namespace(String namespace) {
      c.namespace = Objects.requireNonNull(namespace, "namespace");
      return this;
    }

    /** Deadline of calls that do not wait (release, describe), retries included. Default 10 s. */
    public Builder rpcTimeout(Duration d) {
      c.rpcTimeout = positive("rpcTimeout", d);
      return this;
    }

    /** Bound on the undo of an acquire whose outcome is unknown (capped at rpcTimeout). */
    public Builder releaseTimeout(Duration d) {
      c.releaseTimeout = positive("releaseTimeout", d);
      return this;
    }

    /**
     * The lease of this client's holds: how long a hold outlives a crashed client (with
     * keepOnDisconnect) or a broken stream. Zero (default): lockd's default lease (30 s).
     */
    public Builder leaseTtl(Duration d) {
      if (d.isNegative()) {
        throw new IllegalArgumentException("leaseTtl: must not be negative (got " + d + ")");
      }
      c.leaseTtl = d;
      return this;
    }

    /**
     * HTTP/2 keepalive: a ping every {@code time} (grpc-java sends them at most every 10 s) and
     * the connection is closed when one is unanswered after {@code timeout}. It is how a session
     * notices a replica that hangs: K = max(time, 10 s) + timeout bounds that, and a hold whose
     * lease is shorter than about 1.5 K takes the unary path. Default 10 s and 2 s.
     */
    public Builder keepalive(Duration time, Duration timeout) {
      c.keepaliveTime = positive("keepalive time", time);
      c.keepaliveTimeout = positive("keepalive timeout", timeout);
      return this;
    }

    /** drift = ttl * factor + min, taken off every lease. Default 0.01 and 2 ms. */
    public Builder clockDrift(double factor, Duration min) {
      if (factor < 0 || min.isNegative()) {
        throw new IllegalArgumentException("clockDrift: must not be negative");
      }
      c.clockDriftFactor = factor;
      c.minClockDrift = min;
      return this;
    }

    /** False: every hold takes the unary RPCs and the watchdog. Default true. */
    public Builder useSessions(boolean use) {
      c.useSessions = use;
      return this;
    }

    /**
     * True (default): when the stream breaks lockd leaves the holds to their lease, so that the
     * client resumes them on a new stream; a crashed process's locks free after the lease.
     * False: a broken stream frees them at once (and the client loses them).
     */
    public Builder keepOnDisconnect(boolean keep) {
      c.keepOnDisconnect = keep;
      return this;
    }

    /**
     * Builds the client (does not connect yet).
     *
     * @throws IllegalArgumentException no target, an unresolvable list entry, an unreadable TLS
     *     file (named), a cert without a key
     */
    public LockdClient build() {
      if (c.target == null || c.target.isBlank()) {
        throw new IllegalArgumentException("target: must be set");
      }
      if ((c.certFile == null) != (c.keyFile == null)) {
        throw new IllegalArgumentException("clientCertificate: needs both a cert and a key file");
      }
      if (c.owner == null || c.owner.isEmpty()) {
        c.owner = defaultOwner();
      }
      return new LockdClient(c);
    }

    private static Duration positive(String what, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + ": must be positive (got " + d + ")");
      }
      return d;
    }
  }

  public static Builder builder() {
    return new Builder();
  }

  final Config config;
  final ManagedChannel channel;
  final ScheduledExecutorService scheduler; // timers: reconnects, validity checks, renewals
  private final ExecutorService callbacks; // lost listeners, renewals, async lock calls
  private final CallCredentials credentials;
  final SessionStream session; // package-private for tests (its write and read counters)
  private final Map<String, LocalGate> gates = new ConcurrentHashMap<>();

  private LockdClient(Config config) {
    this.config = config;
    this.channel = newChannel(config);
    this.credentials = config.bearerToken == null ? null : new Bearer(config.bearerToken);
    AtomicInteger n = new AtomicInteger();
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "lockd-timer"));
    this.callbacks = Executors.newCachedThreadPool(
        r -> daemon(r, "lockd-callback-" + n.incrementAndGet()));
    this.session = new SessionStream(this, new AcquirePath.SessionLease(config.leaseTtl,
        config.hangBound(), config.clockDriftFactor, config.minClockDrift));
  }

  /** The owner id lockd sees for this client's holds. */
  public String clientId() {
    return config.owner;
  }

  /** An exclusive, reentrant (per thread) lock on {@code name} in the client's namespace. */
  public LockdLock getLock(String name) {
    return getLock(name, Duration.ZERO);
  }

  /**
   * {@link #getLock(String)} whose holds ask lease {@code leaseTtl} (zero: the client's). A
   * lease other than the session's takes the unary path ({@link AcquirePath}).
   */
  public LockdLock getLock(String name, Duration leaseTtl) {
    return new LockdLock(this, LockSpec.exclusive(name).in(resolve("")), leaseTtl);
  }

  /** A read-write lock on {@code name}: readers SHARED, the writer EXCLUSIVE. */
  public LockdReadWriteLock getReadWriteLock(String name) {
    return new LockdReadWriteLock(this, name, resolve(""));
  }

  /** A semaphore of {@code limit} permits (1-10,000) on {@code name}. */
  public LockdSemaphore getSemaphore(String name, int limit) {
    return new LockdSemaphore(this, name, resolve(""), limit);
  }

  /**
   * Takes every lock of {@code specs} (1-64, no name twice) for this client, all or nothing,
   * waiting up to {@code timeout}; lockd takes them in (namespace, name) order, so two callers
   * never deadlock whatever order they list them in. The guard's {@code close()} releases them.
   *
   * @return the holds, one per spec in order; null when not every lock could be taken in time
   * @throws LockdException FAILED_PRECONDITION with a reason (LOCK_KIND_MISMATCH, ...),
   *     INVALID_ARGUMENT, UNAVAILABLE; nothing is held
   * @throws InterruptedException interrupted while waiting; nothing is held
   */
  public LeaseSet acquireAll(List<LockSpec> specs, Duration timeout) throws InterruptedException {
    List<LockSpec> locks = new ArrayList<>();
    for (LockSpec s : specs) {
      locks.add(s.in(resolve(s.namespace())));
    }
    List<Lease> leases = acquire(newCall(locks, true, config.owner, Duration.ZERO, timeout, true,
        true));
    return leases.isEmpty() ? null : new LeaseSet(leases);
  }

  /**
   * One hold of {@code spec} for {@code owner} (null: this client's), waiting up to
   * {@code wait}: the low-level call under the lock objects, for tools and for handing a hold
   * between processes. {@code ttl} zero: the client's lease. {@code autoRenew} false: the lease
   * lasts one ttl (unary path).
   *
   * @return the hold, or null when not acquired within {@code wait}
   */
  public Lease acquire(LockSpec spec, String owner, Duration ttl, Duration wait,
      boolean autoRenew) throws InterruptedException {
    List<Lease> leases = acquire(newCall(List.of(spec.in(resolve(spec.namespace()))), false,
        owner == null ? config.owner : owner, ttl, wait, autoRenew, true));
    return leases.isEmpty() ? null : leases.get(0);
  }

  /** The state of lock {@code name} in the client's namespace. */
  public LockInfo describe(String name) {
    return unary("describe of " + Errors.describe(resolve(""), name),
        LockServiceGrpc.getDescribeMethod(),
        DescribeRequest.newBuilder().setNamespace(resolve("")).setName(name).build());
  }

  /**
   * Operators only: frees {@code name} whatever its holders ({@code fencingToken} non-zero: only
   * the hold with that token); {@code reason} goes to lockd's audit log. One attempt.
   */
  public ForceReleaseResponse forceRelease(String name, String reason, long fencingToken) {
    ForceReleaseRequest req = ForceReleaseRequest.newBuilder().setNamespace(resolve(""))
        .setName(name).setReason(reason).setFencingToken(fencingToken).build();
    try {
      return call(LockServiceGrpc.getForceReleaseMethod(), req, deadline(config.rpcTimeout), false);
    } catch (StatusRuntimeException | InterruptedException e) {
      throw Errors.fromThrowable("lockd force release of " + Errors.describe(resolve(""), name), e);
    }
  }

  /**
   * Undoes the acquire of {@code owner} whose request_id is {@code acquireRequestId} (from
   * {@link LockdException#unconfirmedAcquireRequestId()}): the hold it added, if it is the
   * owner's last request on the lock, is given back; otherwise nothing changes.
   */
  public ReleaseResponse undoAcquire(String name, String owner, String acquireRequestId) {
    ReleaseRequest req = ReleaseRequest.newBuilder().setNamespace(resolve("")).setName(name)
        .setOwner(owner).setAcquireRequestId(acquireRequestId).build();
    return unary("undo of an acquire of " + Errors.describe(resolve(""), name),
        LockServiceGrpc.getReleaseMethod(), req);
  }

  /**
   * Half-closes the session (lockd releases every hold of it, waited for up to the release
   * timeout), stops the watchdog and shuts the channel down. Idempotent.
   */
  @Override
  public void close() {
    session.close(config.releaseTimeout);
    scheduler.shutdownNow();
    callbacks.shutdown();
    channel.shutdown();
    try {
      if (!channel.awaitTermination(config.releaseTimeout.toMillis(), TimeUnit.MILLISECONDS)) {
        channel.shutdownNow();
      }
    } catch (InterruptedException e) {
      channel.shutdownNow();
      Thread.currentThread().interrupt();
    }
  }

  // ------------------------------------------------------------------ internal

  LocalGate gate(LockSpec spec) {
    return gates.computeIfAbsent(spec.namespace() + "\u0000" + spec.name(), k -> new LocalGate());
  }

  ExecutorService asyncExecutor() {
    return callbacks;
  }

  String resolve(String ns) {
    if (!ns.isEmpty()) {
      return ns;
    }
    return config.namespace.isEmpty() ? "default" : config.namespace;
  }

  AcquireCall newCall(List<LockSpec> locks, boolean all, String owner, Duration ttl,
      Duration wait, boolean autoRenew, boolean interruptible) {
    if (ttl.isNegative() || wait.isNegative()) {
      throw new IllegalArgumentException("ttl and wait: must not be negative");
    }
    long now = System.nanoTime();
    long waitNanos = Math.min(wait.toNanos(), Long.MAX_VALUE / 4);
    return new AcquireCall(List.copyOf(locks), all, owner, ttl, now + waitNanos,
        now + waitNanos + config.rpcTimeout.toNanos(), autoRenew, interruptible);
  }

  /** The holds of {@code call}: over the session or unary; empty when not acquired in time. */
  List<Lease> acquire(AcquireCall call) throws InterruptedException {
    if (session.choose(call.owner().equals(config.owner), call.autoRenew(), call.ttl())
        == AcquirePath.SESSION) {
      try {
        return session.acquire(call);
      } catch (SessionStream.Unsupported e) {
        // Learnt now, kept: nothing was sent, so the unary path takes this call too.
      }
    }
    return unaryAcquire(call);
  }

  void release(Lease l) {
    if (l.session) {
      session.release(l);
    } else {
      stopRenewal(l);
      unaryRelease(l, ReleaseRequest.newBuilder().setNamespace(l.namespace).setName(l.name)
          .setOwner(l.owner).setRequestId(newRequestId()).setFencingToken(l.fencingToken)
          .build());
    }
  }

  void forget(Lease l) {
    if (l.session) {
      session.forget(l);
    } else {
      stopRenewal(l);
    }
  }

  void runCallback(Runnable r) {
    try {
      callbacks.execute(r);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      r.run(); // closed: run it here
    }
  }

  CallOptions callOptions() {
    return credentials == null ? CallOptions.DEFAULT
        : CallOptions.DEFAULT.withCallCredentials(credentials);
  }

  static String newRequestId() {
    return UUID.randomUUID().toString();
  }

  /** Release {@code req} unary, retried on UNAVAILABLE (same request_id) within rpcTimeout. */
  void unaryRelease(Lease l, ReleaseRequest req) {
    String what = "lockd release of " + Errors.describe(l.namespace, l.name);
    long deadline = deadline(config.rpcTimeout);
    long backoff = 50;
    while (true) {
      try {
        call(LockServiceGrpc.getReleaseMethod(), req, deadline, false);
        return;
      } catch (StatusRuntimeException e) {
        LockdException err = Errors.fromThrowable(what, e);
        if (err instanceof LockLostException lost) {
          l.markLost(lost.reason(), "lockd no longer had it when it was released");
          throw lost;
        }
        if (err.code() != Status.Code.UNAVAILABLE || !sleepBefore(deadline, backoff)) {
          throw err;
        }
        backoff = Math.min(backoff * 2, 2000);
      } catch (InterruptedException e) {
        throw new AssertionError(e); // not interruptible
      }
    }
  }

  /**
   * Undoes the attempt {@code requestId} of {@code call} on every lock (Release with
   * acquire_request_id), retried on UNAVAILABLE within min(rpcTimeout, releaseTimeout); runs
   * whatever the caller's deadline or interrupt. Returns whether every undo was answered.
   */
  boolean undo(AcquireCall call, String requestId) {
    Duration bound = config.releaseTimeout.compareTo(config.rpcTimeout) < 0
        ? config.releaseTimeout : config.rpcTimeout;
    long deadline = deadline(bound);
    boolean confirmed = true;
    for (LockSpec l : call.locks()) {
      ReleaseRequest req = ReleaseRequest.newBuilder().setNamespace(l.namespace())
          .setName(l.name()).setOwner(call.owner()).setAcquireRequestId(requestId).build();
      long backoff = 50;
      while (true) {
        try {
          call(LockServiceGrpc.getReleaseMethod(), req, deadline, false);
          break;
        } catch (StatusRuntimeException e) {
          if (e.getStatus().getCode() != Status.Code.UNAVAILABLE
              || !sleepBefore(deadline, backoff)) {
            confirmed = false;
            break;
          }
          backoff = Math.min(backoff * 2, 2000);
        } catch (InterruptedException e) {
          throw new AssertionError(e); // not interruptible
        }
      }
    }
    return confirmed;
  }

  // ------------------------------------------------------------------ unary path

  private List<Lease> unaryAcquire(AcquireCall call) throws InterruptedException {
    String what = "lockd acquire of " + call.describe();
    String requestId = newRequestId();
    long backoff = 50;
    while (true) {
      long send = System.nanoTime();
      try {
        List<AcquireResponse> granted;
        // No lease asked: lockd's default, learnt from the grant.
        Duration asked = call.ttl().isZero() ? config.leaseTtl : call.ttl();
        if (call.all()) {
          AcquireAllRequest.Builder req = call.requestAll(requestId, send).toBuilder();
          if (!asked.isZero()) {
            req.setLeaseTtl(Protos.duration(asked));
          }
          AcquireAllResponse r = call(LockServiceGrpc.getAcquireAllMethod(), req.build(),
              call.deadlineNanos(), call.interruptible());
          granted = r.getAcquired() ? r.getLocksList() : List.of();
        } else {
          AcquireRequest.Builder req = call.request(requestId, send).toBuilder();
          if (!asked.isZero()) {
            req.setLeaseTtl(Protos.duration(asked));
          }
          AcquireResponse r = call(LockServiceGrpc.getAcquireMethod(), req.build(),
              call.deadlineNanos(), call.interruptible());
          granted = r.getAcquired() ? List.of(r) : List.of();
        }
        List<Lease> leases = new ArrayList<>();
        for (int i = 0; i < granted.size(); i++) {
          AcquireResponse g = granted.get(i);
          Duration ttl = Protos.duration(g.getLeaseTtl());
          Lease l = new Lease(this, call.locks().get(i), call.locks().get(i).namespace(),
              call.owner(), g.getFencingToken(), ttl, false,
              LeaseValidity.unaryValidUntil(send, ttl, config.drift(ttl)));
          if (call.autoRenew()) {
            scheduleRenewal(l, ttl.toNanos() / 3);
          }
          leases.add(l);
        }
        return leases;
      } catch (StatusRuntimeException e) {
        Status.Code code = e.getStatus().getCode();
        boolean uncertain = code == Status.Code.UNAVAILABLE
            || code == Status.Code.DEADLINE_EXCEEDED || code == Status.Code.CANCELLED
            || code == Status.Code.UNKNOWN;
        if (!uncertain) {
          throw Errors.fromThrowable(what, e);
        }
        boolean confirmed = undo(call, requestId);
        if (code == Status.Code.UNAVAILABLE && sleepBefore(call.deadlineNanos(), backoff)) {
          backoff = Math.min(backoff * 2, 2000);
          if (confirmed) {
            requestId = newRequestId();
          }
          continue;
        }
        LockdException err = Errors.fromThrowable(what, e);
        throw confirmed ? err : err.withUnconfirmedAcquire(requestId);
      } catch (InterruptedException e) {
        undo(call, requestId);
        throw e;
      }
    }
  }

  private void scheduleRenewal(Lease l, long delayNanos) {
    synchronized (l) {
      if (l.isReleased() || l.lostCause() != null) {
        return;
      }
      try {
        l.renewal = scheduler.schedule(() -> runCallback(() -> renew(l)), delayNanos,
            TimeUnit.NANOSECONDS);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // closed
      }
    }
  }

  private void stopRenewal(Lease l) {
    synchronized (l) {
      if (l.renewal != null) {
        l.renewal.cancel(false);
      }
    }
  }

  /** Lease.renew of a unary hold: retried on UNAVAILABLE within rpcTimeout. */
  void renewOnce(Lease l, Duration ttl) {
    RenewRequest req = RenewRequest.newBuilder().setNamespace(l.namespace).setName(l.name)
        .setOwner(l.owner).setLeaseTtl(Protos.duration(ttl)).setFencingToken(l.fencingToken)
        .build();
    long deadline = deadline(config.rpcTimeout);
    long backoff = 50;
    while (true) {
      long send = System.nanoTime();
      try {
        RenewResponse r = call(LockServiceGrpc.getRenewMethod(), req, deadline, false);
        Duration granted = Protos.duration(r.getLeaseTtl());
        l.setValidUntil(LeaseValidity.unaryValidUntil(send, granted, config.drift(granted)));
        return;
      } catch (StatusRuntimeException e) {
        LockdException err = Errors.fromThrowable("lockd renew of "
            + Errors.describe(l.namespace, l.name), e);
        if (err instanceof LockLostException lost) {
          l.markLost(lost.reason(), "lockd no longer had it when it was renewed");
          throw lost;
        }
        if (err.code() != Status.Code.UNAVAILABLE || !sleepBefore(deadline, backoff)) {
          throw err;
        }
        backoff = Math.min(backoff * 2, 2000);
      } catch (InterruptedException e) {
        throw new AssertionError(e); // not interruptible
      }
    }
  }

  /** The watchdog's renewal of one unary hold; reschedules itself. */
  private void renew(Lease l) {
    if (l.isReleased() || l.lostCause() != null) {
      return;
    }
    long send = System.nanoTime();
    long validity = l.validUntilNanos() - send;
    if (validity <= 0) {
      l.isValid(); // marks it lost
      return;
    }
    RenewRequest req = RenewRequest.newBuilder().setNamespace(l.namespace).setName(l.name)
        .setOwner(l.owner).setLeaseTtl(Protos.duration(l.ttl)).setFencingToken(l.fencingToken)
        .build();
    try {
      RenewResponse r = call(LockServiceGrpc.getRenewMethod(), req,
          send + Math.min(validity, config.rpcTimeout.toNanos()), false);
      if (r.getFencingToken() != 0 && r.getFencingToken() != l.fencingToken) {
        l.markLost("FENCING_TOKEN_CHANGED", "lockd renewed another hold");
        return;
      }
      Duration ttl = Protos.duration(r.getLeaseTtl());
      l.setValidUntil(LeaseValidity.unaryValidUntil(send, ttl, config.drift(ttl)));
      scheduleRenewal(l, ttl.toNanos() / 3);
    } catch (StatusRuntimeException e) {
      LockdException err = Errors.fromThrowable("lockd renew", e);
      if (err instanceof LockLostException lost) {
        l.markLost(lost.reason(), "lockd no longer has it");
        return;
      }
      long left = l.validUntilNanos() - System.nanoTime();
      if (left <= 0) {
        l.isValid();
        return;
      }
      scheduleRenewal(l, Math.min(left, Math.min(l.ttl.toNanos() / 10, 1_000_000_000L)));
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  // ------------------------------------------------------------------ calls

  private <Q, R> R unary(String what, MethodDescriptor<Q, R> method, Q req) {
    long deadline = deadline(config.rpcTimeout);
    long backoff = 50;
    while (true) {
      try {
        return call(method, req, deadline, false);
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() != Status.Code.UNAVAILABLE
            || !sleepBefore(deadline, backoff)) {
          throw Errors.fromThrowable("lockd " + what, e);
        }
        backoff = Math.min(backoff * 2, 2000);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
    }
  }

  /**
   * One unary call with the deadline {@code deadlineNanos}. {@code interruptible}: an interrupt
   * cancels it (lockd gives back a grant it could not deliver) and is thrown; otherwise an
   * interrupt is kept for the caller and the call goes on.
   */
  <Q, R> R call(MethodDescriptor<Q, R> method, Q req, long deadlineNanos, boolean interruptible)
      throws InterruptedException {
    long left = deadlineNanos - System.nanoTime();
    if (left <= 0) {
      throw Status.DEADLINE_EXCEEDED.withDescription("deadline passed before the call")
          .asRuntimeException();
    }
    ClientCall<Q, R> c = channel.newCall(method,
        callOptions().withDeadlineAfter(left, TimeUnit.NANOSECONDS));
    Future<R> f = ClientCalls.futureUnaryCall(c, req);
    boolean interrupted = false;
    try {
      while (true) {
        try {
          return f.get();
        } catch (InterruptedException e) {
          if (interruptible) {
            f.cancel(true);
            throw e;
          }
          interrupted = true;
        } catch (ExecutionException e) {
          if (e.getCause() instanceof StatusRuntimeException s) {
            throw s;
          }
          throw Status.fromThrowable(e.getCause()).asRuntimeException();
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** Sleeps a jittered {@code backoffMs} if that ends before {@code deadline}; not interrupted. */
  private static boolean sleepBefore(long deadlineNanos, long backoffMs) {
    long sleep = TimeUnit.MILLISECONDS.toNanos(
        backoffMs / 2 + ThreadLocalRandom.current().nextLong(backoffMs / 2 + 1));
    if (System.nanoTime() + sleep - deadlineNanos >= 0) {
      return false;
    }
    boolean interrupted = false;
    long end = System.nanoTime() + sleep;
    while (System.nanoTime() - end < 0) {
      try {
        TimeUnit.NANOSECONDS.sleep(end - System.nanoTime());
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return true;
  }

  private static long deadline(Duration d) {
    return System.nanoTime() + d.toNanos();
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  private static String defaultOwner() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      host = "unknown";
    }
    return host + "-" + ProcessHandle.current().pid() + "-"
        + UUID.randomUUID().toString().replace("-", "");
  }

  private static ManagedChannel newChannel(Config c) {
    ChannelCredentials creds;
    if (!c.tls) {
      creds = InsecureChannelCredentials.create();
    } else {
      TlsChannelCredentials.Builder b = TlsChannelCredentials.newBuilder();
      try {
        if (c.caFile != null) {
          b.trustManager(c.caFile);
        }
        if (c.certFile != null) {
          b.keyManager(c.certFile, c.keyFile);
        }
      } catch (IOException e) {
        throw new IllegalArgumentException("tls: cannot read a certificate or key file: "
            + e.getMessage(), e);
      }
      creds = b.build();
    }
    Targets.Target t = Targets.parse(c.target);
    NettyChannelBuilder b = t.builder(creds)
        .defaultLoadBalancingPolicy("round_robin")
        .keepAliveTime(c.keepaliveTime.toNanos(), TimeUnit.NANOSECONDS)
        .keepAliveTimeout(c.keepaliveTimeout.toNanos(), TimeUnit.NANOSECONDS)
        .keepAliveWithoutCalls(true);
    if (c.serverName != null) {
      b.overrideAuthority(c.serverName);
    }
    return b.build();
  }

  /** {@code authorization: Bearer <token>} on every call. */
  private static final class Bearer extends CallCredentials {
    private static final Metadata.Key<String> AUTHORIZATION =
        Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private final String token;

    Bearer(String token) {
      this.token = token;
    }

    @Override
    public void applyRequestMetadata(RequestInfo info, java.util.concurrent.Executor executor,
        MetadataApplier applier) {
      Metadata m = new Metadata();
      m.put(AUTHORIZATION, "Bearer " + token);
      applier.apply(m);
    }
  }
}
