#!/usr/bin/env python3
"""Writes an SPDX 2.3 JSON SBOM of lockd's container image to stdout.

Reads the image's Debian packages from stdin, one per line as
`dpkg-query --show --showformat '${Package}\\t${Version}\\t${Architecture}\\n'`
prints them inside the image, and describes the image as one package (lockd,
Apache-2.0, at --version and --revision) that contains each of them, with a
package URL (purl) per Debian package.

Usage: ... | sbom.py --name lockd-0.1.0-image --version 0.1.0 --revision SHA
Run by scripts/release.sh.
"""

import argparse
import datetime
import json
import re
import sys
import uuid


def spdx_id(text):
    return re.sub(r"[^A-Za-z0-9.-]", "-", text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--revision", required=True)
    args = parser.parse_args()

    image_id = "SPDXRef-image"
    packages = [{
        "SPDXID": image_id,
        "name": "lockd",
        "versionInfo": args.version,
        "supplier": "Organization: the lockd authors",
        "downloadLocation": "NOASSERTION",
        "licenseConcluded": "Apache-2.0",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "NOASSERTION",
        "comment": "lockd's container image, built from revision %s" % args.revision,
    }]
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": image_id}]
    seen = set()
    for line in sys.stdin:
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3 or not fields[0]:
            continue
        name, version, arch = fields
        ref = "SPDXRef-deb-" + spdx_id("%s-%s" % (name, arch))
        if ref in seen:
            continue
        seen.add(ref)
        packages.append({
            "SPDXID": ref,
            "name": name,
            "versionInfo": version,
            "supplier": "Organization: Debian",
            "downloadLocation": "NOASSERTION",
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "externalRefs": [{
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": "pkg:deb/debian/%s@%s?arch=%s&distro=debian-12" % (
                    name, version, arch),
            }],
        })
        relationships.append({"spdxElementId": image_id, "relationshipType": "CONTAINS",
                              "relatedSpdxElement": ref})
    if len(packages) < 2:
        sys.exit("sbom.py: no packages on stdin")

    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": args.name,
        "documentNamespace": "https://lockd.dev/spdx/%s-%s" % (args.name, uuid.uuid4()),
        "creationInfo": {
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "creators": ["Tool: lockd scripts/sbom.py"],
        },
        "packages": packages,
        "relationships": relationships,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
