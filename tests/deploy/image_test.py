"""lockd's container image (deploy/Dockerfile, built by build-test-image.sh)
run with podman: as a non-root user on a read-only root filesystem, it serves
health, takes and releases a lock for a client on the host, and carries the
labels and ports users read.

Run: /usr/bin/python3 image_test.py --image TAG --stubs DIR --client DIR
"""

import argparse
import json
import socket
import sys
import unittest

from deploy_support import import_stubs, podman, wait_serving

ARGS = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ImageMetadataTest(unittest.TestCase):
    def test_runs_lockd_as_numeric_non_root_user_with_ports_and_labels(self):
        info = json.loads(podman("image", "inspect", ARGS.image))[0]
        config = info["Config"]
        self.assertEqual(config["User"], "65532:65532")
        self.assertEqual(config["Entrypoint"], ["/usr/bin/lockd"])
        self.assertIn("7411/tcp", config["ExposedPorts"])
        self.assertIn("9411/tcp", config["ExposedPorts"])
        labels = config["Labels"]
        for key in ("version", "revision", "source", "licenses", "title"):
            self.assertIn("org.opencontainers.image." + key, labels)
        self.assertRegex(labels["org.opencontainers.image.version"], r"^\d+\.\d+\.\d+$")
        self.assertEqual(labels["org.opencontainers.image.licenses"], "Apache-2.0")


class RunningImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        # What a restrictive runtime (Kubernetes with the chart's security
        # context) imposes: read-only root, no capabilities, no privilege gain.
        cls.container = podman(
            "run", "--detach", "--read-only", "--cap-drop=ALL",
            "--security-opt=no-new-privileges", "--publish", "127.0.0.1:%d:7411" % cls.port,
            ARGS.image).strip()
        cls.target = "127.0.0.1:%d" % cls.port

    @classmethod
    def tearDownClass(cls):
        podman("rm", "--force", "--time", "0", cls.container, check=False)

    def test_serves_health_as_non_root_on_read_only_root(self):
        wait_serving(self.target, "lockd.v1.LockService")
        status = podman("exec", self.container, "cat", "/proc/1/status")
        uids = [line.split()[1:] for line in status.splitlines() if line.startswith("Uid:")][0]
        self.assertEqual(set(uids), {"65532"}, "lockd runs as UID 65532 (real, effective, saved)")
        touch = podman("exec", self.container, "sh", "-c",
                       "touch /usr/bin/x 2>&1 || echo REFUSED", check=True)
        self.assertIn("Read-only file system", touch)
        self.assertIn("REFUSED", touch)
        logs = podman("logs", self.container, with_stderr=True)
        self.assertIn("lockd serving on 0.0.0.0:7411", logs)

    def test_acquire_release_round_trip_from_the_host(self):
        import lockd
        wait_serving(self.target, "lockd.v1.LockService")
        with lockd.Client(self.target, owner="image-test") as client:
            lease = client.acquire("deploy/image", ttl=30)
            self.assertGreater(lease.fencing_token, 0)
            # lockctl in the image sees the same lock (the tool users exec into a pod).
            described = podman("exec", self.container, "lockctl", "describe",
                               "--name", "deploy/image", "--output", "json")
            info = json.loads(described)
            self.assertEqual(info["owner"], "image-test")
            self.assertEqual(int(info["fencingToken"]), lease.fencing_token)  # proto3 JSON: a string
            lease.release()
            self.assertFalse(client.describe("deploy/image").held)

    def test_sigterm_stops_it_with_exit_code_zero(self):
        port = free_port()
        name = podman("run", "--detach", "--read-only", "--publish",
                      "127.0.0.1:%d:7411" % port, ARGS.image).strip()
        try:
            wait_serving("127.0.0.1:%d" % port)
            podman("stop", "--time", "20", name)
            code = podman("inspect", "--format", "{{.State.ExitCode}}", name).strip()
            self.assertEqual(code, "0")
        finally:
            podman("rm", "--force", "--time", "0", name, check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", required=True)
    parser.add_argument("--stubs", required=True)
    parser.add_argument("--client", required=True)
    ARGS, rest = parser.parse_known_args()
    import_stubs(ARGS.stubs, ARGS.client)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
