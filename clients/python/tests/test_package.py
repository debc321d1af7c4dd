"""Checks the installed package as users get it from the wheel (prepare.sh
installs it into the test venv): `import lockd` resolves into the venv, not
the source tree; the version is the VERSION file's; py.typed, the generated
stubs and the metadata (licence, project URLs, dependency floors the stubs
accept) are in the distribution; the source tree holds no generated code.
"""

import glob
import os
import re
import sys
import unittest
from importlib import metadata

import lockd

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("LOCKD_SOURCE_DIR") or os.path.join(HERE, "..", "..", "..")


class PackageTest(unittest.TestCase):
    def test_lockd_is_the_installed_wheel_of_the_project_version(self):
        self.assertTrue(os.path.realpath(lockd.__file__).startswith(
            os.path.realpath(sys.prefix) + os.sep), lockd.__file__)
        with open(os.path.join(SOURCE, "VERSION")) as f:
            self.assertEqual(lockd.__version__, f.read().strip())
        self.assertEqual(metadata.version("lockd-client"), lockd.__version__)

    def test_distribution_ships_types_stubs_and_licence(self):
        files = {str(f) for f in metadata.files("lockd-client")}
        for name in ("lockd/py.typed", "lockd/aio.py", "lockd/_proto/lockd/v1/lock_pb2.py",
                     "lockd/_proto/lockd/v1/lock_pb2_grpc.py",
                     "lockd/_proto/google/rpc/status_pb2.py"):
            self.assertIn(name, files)
        self.assertTrue(any(f.endswith("LICENSE") for f in files), files)
        meta = metadata.metadata("lockd-client")
        self.assertEqual(meta["License"], "Apache-2.0")
        self.assertIn("Typing :: Typed", meta.get_all("Classifier"))
        self.assertEqual(meta["Requires-Python"], ">=3.9")

    def test_metadata_links_to_the_project_home(self):
        # pyproject's [project.urls], as index pages show them: all on the
        # repository that the Go client's module path names, and the pages
        # they name exist in it.
        with open(os.path.join(SOURCE, "clients", "go", "go.mod")) as f:
            module = f.readline().split()[1]  # "module github.com/OWNER/REPO/clients/go"
        self.assertTrue(module.endswith("/clients/go"), module)
        home = "https://" + module[:-len("/clients/go")]
        urls = dict(u.split(", ", 1)
                    for u in metadata.metadata("lockd-client").get_all("Project-URL") or [])
        self.assertEqual(sorted(urls), ["Documentation", "Homepage", "Issues", "Source"])
        self.assertEqual((urls["Homepage"], urls["Issues"]), (home, home + "/issues"))
        for label, kind in (("Documentation", "blob"), ("Source", "tree")):
            prefix = "%s/%s/main/" % (home, kind)
            self.assertTrue(urls[label].startswith(prefix), urls[label])
            path = os.path.join(SOURCE, *urls[label][len(prefix):].split("/"))
            self.assertTrue(os.path.exists(path), "%s: %s" % (label, path))

    def test_dependency_floors_are_what_the_stubs_require(self):
        requires = dict(re.match(r"(\w+)>=([\d.]+)$", r).groups()
                        for r in metadata.requires("lockd-client"))
        self.assertEqual(sorted(requires), ["grpcio", "protobuf"])
        from lockd._proto.lockd.v1 import lock_pb2_grpc
        generated = getattr(lock_pb2_grpc, "GRPC_GENERATED_VERSION", "1.51")
        self.assertEqual(requires["grpcio"], ".".join(generated.split(".")[:2]))
        with open(os.path.join(os.path.dirname(lockd.__file__), "_proto", "lockd", "v1",
                               "lock_pb2.py")) as f:
            protobuf = re.search(r"^# Protobuf Python Version: (\d+\.\d+)", f.read(), re.M)
        self.assertEqual(requires["protobuf"], protobuf.group(1) if protobuf else "4.21")

    def test_source_tree_holds_no_generated_stubs(self):
        self.assertEqual(glob.glob(os.path.join(HERE, "..", "lockd", "**", "*_pb2*.py"),
                                   recursive=True), [])


if __name__ == "__main__":
    unittest.main()
