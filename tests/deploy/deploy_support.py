"""Helpers of the deploy tests that drive podman and lockd from Python
(Debian's python3-grpcio under /usr/bin/python3)."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def podman_env():
    """The environment podman runs in: the containers.conf of lib.sh (no
    rlimits asked for, runc)."""
    out = subprocess.run(["bash", "-c", ". ./lib.sh && echo $CONTAINERS_CONF"], cwd=HERE,
                         check=True, capture_output=True, text=True).stdout.strip()
    return dict(os.environ, CONTAINERS_CONF=out)


ENV = None


def podman(*args, check=True, timeout=300, with_stderr=False):
    """Runs podman; returns its stdout (and stderr: `podman logs` writes a
    container's stderr there). Raises with podman's stderr on failure."""
    global ENV
    if ENV is None:
        ENV = podman_env()
    p = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise RuntimeError("podman %s: exit %d\n%s%s" % (" ".join(args), p.returncode,
                                                        p.stdout, p.stderr))
    return p.stdout + p.stderr if with_stderr else p.stdout


def import_stubs(stubs_dir, client_dir):
    """Makes the generated stubs (health) and the lockd client importable."""
    for d in (stubs_dir, client_dir):
        if d not in sys.path:
            sys.path.insert(0, d)


def wait_serving(target, service="", timeout=60.0):
    """Waits until grpc.health.v1.Health/Check on `target` answers SERVING."""
    import grpc
    import health_pb2
    import health_pb2_grpc
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        with grpc.insecure_channel(target) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = "status %d" % reply.status
            except grpc.RpcError as e:
                last = "%s %s" % (e.code(), e.details())
        time.sleep(0.5)
    raise AssertionError("%s not SERVING after %.0fs: %s" % (target, timeout, last))
