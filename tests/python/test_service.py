"""lockd seen by independent clients: Python stubs generated from our proto
and from Debian's grpc-proto (reflection, health), talking to a real lockd
process. Checks what grpcurl relies on (`grpcurl list`, `grpcurl describe`),
the health service, Acquire/Release through generated stubs, and that
LOCK_NOT_HELD arrives as a standard google.rpc.Status with ErrorInfo.

Run: /usr/bin/python3 test_service.py --lockd PATH --stubs DIR
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LockdProcess:
    def __init__(self, extra_flags=()):
        self.port = free_port()
        self.log = tempfile.NamedTemporaryFile(prefix="lockd-py-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [ARGS.lockd, "--listen=127.0.0.1:%d" % self.port, *extra_flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if "lockd serving on" in self.read_log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError("lockd did not start:\n" + self.read_log())

    def read_log(self):
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=15)
        os.unlink(self.log.name)
        return code


class ServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        cls.lockd = LockdProcess()
        cls.channel = grpc.insecure_channel("127.0.0.1:%d" % cls.lockd.port)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        assert cls.lockd.stop() == 0

    def reflect(self, request):
        import reflection_pb2
        import reflection_pb2_grpc
        stub = reflection_pb2_grpc.ServerReflectionStub(self.channel)
        responses = list(stub.ServerReflectionInfo(iter([request]), timeout=10))
        self.assertEqual(len(responses), 1)
        return responses[0]

    def test_reflection_lists_services_like_grpcurl_list(self):
        import reflection_pb2
        resp = self.reflect(reflection_pb2.ServerReflectionRequest(list_services=""))
        names = {s.name for s in resp.list_services_response.service}
        self.assertIn("lockd.v1.LockService", names)
        self.assertIn("grpc.health.v1.Health", names)

    def test_reflection_describes_lock_service_like_grpcurl_describe(self):
        from google.protobuf import descriptor_pb2
        import reflection_pb2
        resp = self.reflect(reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="lockd.v1.LockService"))
        files = {}
        for raw in resp.file_descriptor_response.file_descriptor_proto:
            fd = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[fd.name] = fd
        self.assertIn("lockd/v1/lock.proto", files)
        lock = files["lockd/v1/lock.proto"]
        self.assertEqual(lock.package, "lockd.v1")
        service = [s for s in lock.service if s.name == "LockService"][0]
        self.assertEqual([m.name for m in service.method],
                         ["Acquire", "Release", "Renew", "Describe", "List", "ForceRelease",
                          "Session", "AcquireAll"])
        acquire = [m for m in lock.message_type if m.name == "AcquireRequest"][0]
        self.assertEqual([(f.name, f.number) for f in acquire.field],
                         [("namespace", 1), ("name", 2), ("owner", 3), ("lease_ttl", 4),
                          ("wait_timeout", 5), ("request_id", 6), ("mode", 7), ("limit", 8),
                          ("permits", 9)])
        # Dependencies are served too, so a client can resolve every type.
        self.assertIn("google/protobuf/duration.proto", lock.dependency)
        dep = self.reflect(reflection_pb2.ServerReflectionRequest(
            file_by_filename="google/protobuf/duration.proto"))
        self.assertTrue(dep.file_descriptor_response.file_descriptor_proto)

    def test_health_reports_serving(self):
        import health_pb2
        import health_pb2_grpc
        stub = health_pb2_grpc.HealthStub(self.channel)
        for service in ("", "lockd.v1.LockService"):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            self.assertEqual(resp.status, health_pb2.HealthCheckResponse.SERVING, service)

    def test_acquire_and_release_through_python_stubs(self):
        from lockd.v1 import lock_pb2, lock_pb2_grpc
        from google.protobuf import duration_pb2
        stub = lock_pb2_grpc.LockServiceStub(self.channel)
        resp = stub.Acquire(lock_pb2.AcquireRequest(
            name="py/orders/42", owner="python",
            lease_ttl=duration_pb2.Duration(seconds=10)), timeout=10)
        self.assertTrue(resp.acquired)
        self.assertEqual(resp.hold_count, 1)
        self.assertGreater(resp.fencing_token, 0)
        info = stub.Describe(lock_pb2.DescribeRequest(name="py/orders/42"), timeout=10)
        self.assertTrue(info.held)
        self.assertEqual(info.owner, "python")
        self.assertEqual(info.backend, "memory")
        rel = stub.Release(lock_pb2.ReleaseRequest(name="py/orders/42", owner="python"), timeout=10)
        self.assertTrue(rel.released)

    def test_lock_not_held_carries_standard_error_info(self):
        import grpc
        from google.rpc import error_details_pb2, status_pb2
        from lockd.v1 import lock_pb2, lock_pb2_grpc
        stub = lock_pb2_grpc.LockServiceStub(self.channel)
        with self.assertRaises(grpc.RpcError) as caught:
            stub.Release(lock_pb2.ReleaseRequest(name="py/never", owner="python"), timeout=10)
        err = caught.exception
        self.assertEqual(err.code(), grpc.StatusCode.FAILED_PRECONDITION)
        raw = dict(err.trailing_metadata()).get("grpc-status-details-bin")
        self.assertIsNotNone(raw, "no grpc-status-details-bin trailer")
        status = status_pb2.Status.FromString(raw)
        self.assertEqual(status.code, grpc.StatusCode.FAILED_PRECONDITION.value[0])
        info = error_details_pb2.ErrorInfo()
        self.assertTrue(status.details[0].Unpack(info))
        self.assertEqual((info.reason, info.domain), ("LOCK_NOT_HELD", "lockd"))

    def test_invalid_argument_names_the_field(self):
        import grpc
        from google.protobuf import duration_pb2
        from lockd.v1 import lock_pb2, lock_pb2_grpc
        stub = lock_pb2_grpc.LockServiceStub(self.channel)
        with self.assertRaises(grpc.RpcError) as caught:
            stub.Acquire(lock_pb2.AcquireRequest(
                name="py/x", lease_ttl=duration_pb2.Duration(seconds=0)), timeout=10)
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(caught.exception.details().startswith("lease_ttl:"))


class ProcessTest(unittest.TestCase):
    def test_sigterm_answers_waiters_unavailable_and_exits_zero(self):
        import grpc
        import threading
        from google.protobuf import duration_pb2
        from lockd.v1 import lock_pb2, lock_pb2_grpc
        lockd = LockdProcess()
        channel = grpc.insecure_channel("127.0.0.1:%d" % lockd.port)
        stub = lock_pb2_grpc.LockServiceStub(channel)
        stub.Acquire(lock_pb2.AcquireRequest(name="sd", owner="a"), timeout=10)
        result = {}

        def wait():
            try:
                stub.Acquire(lock_pb2.AcquireRequest(
                    name="sd", owner="b", wait_timeout=duration_pb2.Duration(seconds=60)),
                    timeout=60)
                result["code"] = grpc.StatusCode.OK
            except grpc.RpcError as e:
                result["code"] = e.code()

        t = threading.Thread(target=wait)
        t.start()
        deadline = time.time() + 10
        while stub.Describe(lock_pb2.DescribeRequest(name="sd"), timeout=10).waiters != 1:
            self.assertLess(time.time(), deadline, "waiter never parked")
            time.sleep(0.02)
        start = time.time()
        self.assertEqual(lockd.stop(), 0)
        t.join(timeout=15)
        self.assertEqual(result.get("code"), grpc.StatusCode.UNAVAILABLE)
        self.assertLess(time.time() - start, 10)
        channel.close()

    def run_lockd(self, *flags, env=None):
        return subprocess.run([ARGS.lockd, *flags], capture_output=True, text=True, timeout=30,
                              env=env)

    def test_unknown_flag_and_malformed_values_exit_2_naming_them(self):
        r = self.run_lockd("--lease.defualt=3s")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--lease.defualt", r.stderr)
        r = self.run_lockd("--lease.max=soon")
        self.assertEqual(r.returncode, 2)
        self.assertIn("lease.max", r.stderr)

    def test_second_lockd_on_a_taken_port_fails_to_start(self):
        first = LockdProcess()
        try:
            r = self.run_lockd("--listen=127.0.0.1:%d" % first.port)
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot listen on 127.0.0.1:%d" % first.port, r.stderr)
        finally:
            self.assertEqual(first.stop(), 0)

    def test_unknown_key_in_config_file_exits_2_naming_it(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("listen: 127.0.0.1:0\nlease:\n  defualt: 3s\n")
        try:
            r = self.run_lockd("--config", f.name)
            self.assertEqual(r.returncode, 2)
            self.assertIn("lease.defualt", r.stderr)
        finally:
            os.unlink(f.name)

    def test_environment_variable_is_validated_and_named(self):
        env = dict(os.environ, LOCKD_BACKEND="etcd")
        r = self.run_lockd(env=env)
        self.assertEqual(r.returncode, 2)
        self.assertIn("LOCKD_BACKEND", r.stderr)

    def test_help_lists_every_documented_key(self):
        r = self.run_lockd("--help")
        self.assertEqual(r.returncode, 0)
        for key in ("listen", "backend", "lease.default", "lease.min", "lease.max",
                    "redis.addresses", "mysql.host", "zookeeper.hosts"):
            self.assertIn("--" + key + " [", r.stdout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--lockd", required=True)
    parser.add_argument("--stubs", required=True)
    ARGS, rest = parser.parse_known_args()
    sys.path.insert(0, ARGS.stubs)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
