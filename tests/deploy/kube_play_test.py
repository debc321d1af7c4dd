"""End to end: the chart rendered by the real Helm for the redis backend with
two replicas, its Deployment, ConfigMap and Secret run as real pods by
`podman kube play`, beside a Redis pod with a password (which reaches lockd
only through the chart's Secret, mounted as a file). The lockd Python client
takes and releases locks through each pod; then one pod's container is
killed and the other keeps serving, with the lock's state intact; last, the
chart's `helm test` Pod (lockctl verify) runs against the release and passes.

Pods live on a podman network made for the run; the test reaches them at
their addresses on it, as a Service would.

Run: /usr/bin/python3 kube_play_test.py --helm PATH --chart DIR --image TAG
       --redis-image TAG --stubs DIR --client DIR
"""

import argparse
import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from deploy_support import import_stubs, podman, wait_serving

ARGS = None
KINDS = ("ConfigMap", "Secret", "Deployment")  # what kube play runs of the chart


def render(release, values, strings=()):
    """helm template with --set `values` and --set-string `strings` (values
    that must stay strings even when they look like numbers, such as an image
    tag of digits); returns the objects kube play runs."""
    import yaml  # Debian's python3-yaml (scripts/install-deps.sh)
    args = [ARGS.helm, "template", release, ARGS.chart]
    for v in values:
        args += ["--set", v]
    for v in strings:
        args += ["--set-string", v]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(out) if d and d["kind"] in KINDS]


def render_test_pod(release, values, strings=()):
    """The chart's `helm test` hook (templates/tests/verify-pod.yaml), rendered
    with the same values: the Pod object."""
    import yaml
    args = [ARGS.helm, "template", release, ARGS.chart,
            "--show-only", "templates/tests/verify-pod.yaml"]
    for v in values:
        args += ["--set", v]
    for v in strings:
        args += ["--set-string", v]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    (pod,) = [d for d in yaml.safe_load_all(out) if d]
    return pod


def documented_grpcurl_calls():
    """(JSON body, method) of each grpcurl line of docs/kubernetes.md."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "kubernetes.md")) as f:
        page = f.read()
    return re.findall(r"^grpcurl -plaintext -d '([^']*)' 127\.0\.0\.1:7411 (\S+)$", page, re.M)


def adapt_for_podman(objects):
    """Works around two faults of Debian 12's podman (4.3) that Kubernetes
    does not have, on the objects only (the chart is unchanged):
      - before 4.4 kube play writes a Secret's `data` into its volume files
        still base64-encoded (containers/podman#16625): it is given the
        decoded values, which it then writes as they are;
      - before 5.0 kube play publishes every containerPort on the host, so two
        replicas on one machine would clash on 7411: the container ports,
        which only name ports in Kubernetes, are left out (the probes and the
        test use the port numbers).
    """
    version = tuple(int(x) for x in podman("version", "--format", "{{.Client.Version}}")
                    .strip().split("-")[0].split(".")[:2])
    for obj in objects:
        if obj["kind"] == "Secret" and version < (4, 4):
            obj["data"] = {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}
        if obj["kind"] == "Deployment" and version < (5, 0):
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container.pop("ports", None)
    return objects


class KubePlayTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import yaml
        # Names unique to this run: test runs of other checkouts may share podman.
        release = "e2e%s" % secrets.token_hex(4)
        run = "lockd-" + release
        fullname = release + "-lockd"
        # Class cleanups run last registered first, and also when setUpClass fails.
        tmp = tempfile.mkdtemp(prefix=run)
        cls.addClassCleanup(shutil.rmtree, tmp, ignore_errors=True)
        podman("network", "create", run)
        cls.addClassCleanup(podman, "network", "rm", "--force", run, check=False)

        password = secrets.token_hex(12)
        redis = podman("run", "--detach", "--name", run + "-redis", "--network", run,
                       ARGS.redis_image, "--port", "6379", "--bind", "0.0.0.0",
                       "--save", "", "--appendonly", "no", "--requirepass", password).strip()
        cls.addClassCleanup(podman, "rm", "--force", "--time", "0", redis, check=False)
        redis_ip = cls.address(redis, run)

        repository, tag = ARGS.image.split("/", 1)[1].rsplit(":", 1)
        cls.release, cls.network, cls.tmp = release, run, tmp
        cls.values = [
            "backend=redis", "replicaCount=2",
            "redis.addresses={%s:6379}" % redis_ip, "redis.auth.password=" + password,
            "image.registry=localhost", "image.repository=" + repository,
            "image.pullPolicy=Never",
        ]
        cls.strings = ["image.tag=" + tag]
        objects = render(release, cls.values, strings=cls.strings)
        if password in json.dumps([o for o in objects if o["kind"] != "Secret"]):
            raise AssertionError("the Redis password is outside the Secret")
        kube_file = os.path.join(tmp, "lockd.yaml")
        with open(kube_file, "w") as f:
            yaml.safe_dump_all(adapt_for_podman(objects), f)
        # kube play keeps the ConfigMap and the Secret in volumes (and the
        # Secret as a podman secret) named after them, which `kube down` leaves.
        cls.addClassCleanup(podman, "volume", "rm", "--force", fullname, fullname + "-credentials",
                            check=False)
        cls.addClassCleanup(podman, "secret", "rm", fullname + "-credentials", check=False)
        cls.addClassCleanup(podman, "kube", "down", kube_file, check=False)
        podman("kube", "play", "--network", run, kube_file)

        # kube play names a Deployment's pods <name>-pod-<i>, their containers <pod>-<container>.
        cls.containers = ["%s-pod-%d-lockd" % (fullname, i) for i in range(2)]
        cls.targets = ["%s:7411" % cls.address(c, run) for c in cls.containers]
        for target in cls.targets:
            wait_serving(target, "lockd.v1.LockService", timeout=90)

    @staticmethod
    def address(container, network):
        info = json.loads(podman("inspect", container))[0]
        networks = info["NetworkSettings"]["Networks"]
        if network not in networks:  # a pod's container shares its infra container's network
            infra = json.loads(podman("pod", "inspect", info["Pod"]))["InfraContainerID"]
            networks = json.loads(podman("inspect", infra))[0]["NetworkSettings"]["Networks"]
        return networks[network]["IPAddress"]

    def test_0_documented_grpcurl_requests_answer_through_each_pod(self):
        # The grpcurl lines of docs/kubernetes.md, sent as grpcurl
        # sends them (the JSON body parsed into the method's request message)
        # to each pod, which stands in for the port-forward.
        import grpc
        import health_pb2
        import health_pb2_grpc
        from google.protobuf import json_format
        from lockd._proto.lockd.v1 import lock_pb2, lock_pb2_grpc
        calls = documented_grpcurl_calls()
        self.assertEqual([m for _, m in calls], ["grpc.health.v1.Health/Check",
                                                 "lockd.v1.LockService/Acquire",
                                                 "lockd.v1.LockService/Release"])
        for target in self.targets:
            with grpc.insecure_channel(target) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                locks = lock_pb2_grpc.LockServiceStub(channel)
                replies = []
                for body, method in calls:
                    service, name = method.rsplit("/", 1)
                    if service == "grpc.health.v1.Health":
                        request = json_format.Parse(body, health_pb2.HealthCheckRequest())
                        replies.append(health.Check(request, timeout=10))
                    else:
                        request = json_format.Parse(body, getattr(lock_pb2, name + "Request")())
                        replies.append(getattr(locks, name)(request, timeout=10))
                self.assertEqual(replies[0].status, health_pb2.HealthCheckResponse.SERVING)
                self.assertTrue(replies[1].acquired, target)
                self.assertTrue(replies[2].released, target)

    def test_1_each_pod_takes_and_releases_a_lock(self):
        import lockd
        for i, target in enumerate(self.targets):
            with lockd.Client(target, owner="e2e-%d" % i) as client:
                with client.lock("e2e/each-pod-%d" % i, ttl=30) as lease:
                    self.assertGreater(lease.fencing_token, 0)
                    info = client.describe("e2e/each-pod-%d" % i)
                    self.assertEqual((info.held, info.owner, info.backend),
                                     (True, "e2e-%d" % i, "redis"))
                self.assertFalse(client.describe("e2e/each-pod-%d" % i).held)

    def test_2_other_pod_keeps_serving_with_the_lock_intact_when_one_dies(self):
        import lockd
        first, second = self.targets
        with lockd.Client(first, owner="holder") as a, lockd.Client(second, owner="rival") as b:
            lease = a.acquire("e2e/orders", ttl=60)
            lease.detach()  # the holder's pod is about to die: no watchdog, no release
            with self.assertRaises(lockd.LockNotAcquired) as caught:
                b.try_acquire("e2e/orders")
            self.assertEqual(caught.exception.holder.owner, "holder")

        # SIGKILL: no shutdown, no release. (The pod's restart policy may
        # bring the container back later; it died all the same.)
        started = podman("inspect", "--format", "{{.State.StartedAt}}", self.containers[0])
        podman("kill", "--signal", "KILL", self.containers[0])
        state = podman("inspect", "--format", "{{.State.Status}} {{.State.StartedAt}}",
                       self.containers[0])
        self.assertTrue(not state.startswith("running") or started.strip() not in state, state)

        with lockd.Client(second, owner="holder") as holder:
            info = holder.describe("e2e/orders")
            self.assertEqual((info.held, info.owner, info.fencing_token),
                             (True, "holder", lease.fencing_token))
            self.assertEqual(holder.release("e2e/orders", "holder"), (True, 0))
        with lockd.Client(second, owner="next") as b:
            with b.lock("e2e/orders", ttl=30) as again:
                self.assertGreater(again.fencing_token, lease.fencing_token)

    def test_3_helm_test_pod_verifies_the_release(self):
        # `helm test`: the chart's test hook Pod (lockctl verify, mutex, no
        # nemesis), run as kube play runs a Pod, against this release. podman
        # has no Services: the Service's DNS name in the Pod's --server is
        # given to the second lockd pod (the first was killed above) by a
        # hostAlias, as the cluster's DNS would resolve it to a pod behind
        # the Service. A short run keeps the test near a minute.
        import yaml
        pod = render_test_pod(self.release, self.values + ["tests.verify.duration=5s"],
                              self.strings)
        self.assertEqual(pod["metadata"]["annotations"]["helm.sh/hook"], "test")
        (container,) = pod["spec"]["containers"]
        (server,) = [a.split("=", 1)[1] for a in container["args"]
                     if a.startswith("--server=")]
        host = server.rsplit(":", 1)[0]
        self.assertEqual(host, "%s-lockd.default.svc" % self.release)
        pod["spec"]["hostAliases"] = [{"ip": self.targets[1].rsplit(":", 1)[0],
                                       "hostnames": [host]}]
        kube_file = os.path.join(self.tmp, "verify.yaml")
        with open(kube_file, "w") as f:
            yaml.safe_dump(pod, f)
        self.addCleanup(podman, "kube", "down", kube_file, check=False)
        podman("kube", "play", "--network", self.network, kube_file)
        # kube play names a Pod's containers <pod>-<container>.
        name = "%s-%s" % (pod["metadata"]["name"], container["name"])
        code = int(podman("wait", name, timeout=120).strip())
        logs = podman("logs", name, with_stderr=True)
        sys.stdout.write(logs)
        self.assertEqual(code, 0, logs)  # helm test passes on exit 0
        self.assertIn("exclusion     PASS", logs)
        self.assertIn("verify: PASSED", logs)
        # It cleaned up: nothing of its namespace is left held.
        import lockd
        with lockd.Client(self.targets[1], owner="e2e-after-verify") as client:
            held = list(client.list(namespace="lockd-verify"))
            self.assertEqual(held, [])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for flag in ("--helm", "--chart", "--image", "--redis-image", "--stubs", "--client"):
        parser.add_argument(flag, required=True)
    ARGS, rest = parser.parse_known_args()
    import_stubs(ARGS.stubs, ARGS.client)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
