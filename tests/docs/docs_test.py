"""Checks the documentation: the site builds, and no cited file is missing.

1. `mkdocs build --strict` of mkdocs.yml into a temporary directory: a nav
   entry naming a missing page, or a link from one page to a file that is not
   in docs/, fails the build.
2. Every repository path cited in README.md, ARCHITECTURE.md, docs/**/*.md
   and in the comments of the code (`.h`, `.cc`, `.py`, `.proto` files under
   service/, backends/, clients/, tools/, protos/, util/, tests/support/)
   exists. A cited path is:
     - in Markdown, a link target `[text](target)` (not a URL), resolved from
       the page's folder; and, anywhere else in the page (code spans and
       blocks included), a word that starts with a top-level folder of the
       repository (TOP_LEVEL) and ends in a file extension, resolved from the
       root;
     - in code, such a word inside a comment (`//` to the end of the line or
       `/* ... */` in C++ and proto; `#` to the end of the line, or a
       triple-quoted string, in Python), resolved from the root or from a
       folder that holds the file (clients/python/tests/wheel_test.py may
       cite tests/test_client.py, its package's own folder).
   A link's `#fragment` into a Markdown page must be one of its headings.
   A word continues over letters, digits, `_`, `.`, `-` and `/`, so a
   placeholder (`backends/<name>/<name>_options.cc`) or a glob
   (`ci/*-values.yaml`) is not a cited path.
3. Every section cited as `docs/api.md "Section"` (or `docs/api.md,
   "Section", "Other"`), in the same places, is a heading of docs/api.md.

Usage: docs_test.py SOURCE_DIR   (run by ctest as docs_test, tests/docs/)
"""

import glob
import os
import re
import subprocess
import sys
import tempfile
import unicodedata
import unittest

SOURCE = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                         os.path.join(os.path.dirname(__file__), "..", ".."))

TOP_LEVEL = ("backends", "bench", "clients", "cmake", "deploy", "docs", "protos", "scripts",
             "service", "tests", "tools", "util")
CODE_FOLDERS = ("service", "backends", "clients", "tools", "protos", "util", "tests/support")
CODE_EXTENSIONS = (".h", ".cc", ".py", ".proto")

PATH_WORD = re.compile(r"(?<![\w./<>*{}$-])((?:%s)/[\w./-]*\.[A-Za-z][\w]*)(?![\w/<>*{}$-])"
                       % "|".join(TOP_LEVEL))
LINK = re.compile(r"\]\(([^)\s]+)\)")
API_SECTIONS = re.compile(r'docs/api\.md,?\s*((?:"[^"]+"(?:,\s*)?)+)')


def cited_api_sections(text):
    """Section names cited as `docs/api.md "A", "B"` in a text."""
    return [name for group in API_SECTIONS.findall(text)
            for name in re.findall(r'"([^"]+)"', group)]


def markdown_citations(text):
    """(link targets as (path, fragment), root-relative path words) cited in a
    Markdown text. A link within the page has an empty path."""
    links = []

    def take(match):
        target = match.group(1)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target):
            path, _, fragment = target.partition("#")
            links.append((path, fragment))
        return "]()"
    rest = LINK.sub(take, text)
    return links, [w.rstrip(".") for w in PATH_WORD.findall(rest)]


def heading_anchors(text):
    """The anchors mkdocs gives the headings of a Markdown text (the `toc`
    extension's slugify), fenced code blocks left out."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    anchors = set()
    for heading in re.findall(r"^#+ (.*?)\s*$", text, re.M):
        slug = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
        slug = re.sub(r"[^\w\s-]", "", slug).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", slug))
    return anchors


def code_comments(path, text):
    """The comment text of a code file, as one string."""
    if path.endswith(".py"):
        parts = re.findall(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'', text, re.S)
        docstrings = [a or b for a, b in parts]
        text = re.sub(r'"""(.*?)"""|\'\'\'(.*?)\'\'\'', "", text, flags=re.S)
        return "\n".join(docstrings + re.findall(r"#(.*)$", text, re.M))
    blocks = re.findall(r"/\*(.*?)\*/", text, re.S)
    return "\n".join(blocks + re.findall(r"//(.*)$", text, re.M))


def missing_citations(root):
    """['file: cited path', ...] for every cited path that does not exist."""
    missing = []
    with open(os.path.join(root, "docs", "api.md"), encoding="utf-8") as f:
        api_sections = set(re.findall(r"^#+ (.*?)\s*$", f.read(), re.M))

    def check_sections(where, text):
        for name in cited_api_sections(text):
            if name not in api_sections:
                missing.append('%s: docs/api.md "%s"' % (where, name))
    pages = ["README.md", "ARCHITECTURE.md"] + sorted(
        os.path.relpath(p, root)
        for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    for page in pages:
        with open(os.path.join(root, page), encoding="utf-8") as f:
            text = f.read()
        check_sections(page, text)
        links, words = markdown_citations(text)
        base = os.path.dirname(page)
        for link, fragment in links:
            target = os.path.join(root, base, link) if link else os.path.join(root, page)
            if not os.path.exists(target):
                missing.append("%s: link to %s" % (page, link))
            elif fragment and target.endswith(".md"):
                with open(target, encoding="utf-8") as f:
                    if fragment not in heading_anchors(f.read()):
                        missing.append("%s: link to %s#%s" % (page, link, fragment))
        for word in words:
            if not os.path.exists(os.path.join(root, word)):
                missing.append("%s: %s" % (page, word))
    for folder in CODE_FOLDERS:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for name in sorted(files):
                if not name.endswith(CODE_EXTENSIONS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    comments = code_comments(name, f.read())
                check_sections(os.path.relpath(path, root), comments)
                bases = [dirpath]
                while os.path.relpath(bases[-1], root) != ".":
                    bases.append(os.path.dirname(bases[-1]))
                for word in PATH_WORD.findall(comments):
                    word = word.rstrip(".")
                    if not any(os.path.exists(os.path.join(b, word)) for b in bases):
                        missing.append("%s: %s" % (os.path.relpath(path, root), word))
    return missing


class DocsTest(unittest.TestCase):
    def test_site_builds_strict(self):
        with tempfile.TemporaryDirectory(prefix="lockd-docs-") as site:
            proc = subprocess.run(["mkdocs", "build", "--strict",
                                   "--config-file", os.path.join(SOURCE, "mkdocs.yml"),
                                   "--site-dir", site],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            warnings = [re.sub(r"\x1b\[[0-9;]*m", "", line)
                        for line in proc.stdout.splitlines() if "INFO" not in line]
            self.assertEqual(proc.returncode, 0, "\n".join(warnings))
            self.assertTrue(os.path.exists(os.path.join(site, "api", "index.html")))

    def test_every_cited_path_exists(self):
        self.assertEqual(missing_citations(SOURCE), [])

    def test_rule_finds_citations_and_skips_placeholders(self):
        links, words = markdown_citations(
            "See `service/validation.h`, [the API](api.md#sessions), "
            "[up](https://example.com/x.md), `backends/<name>/<name>_options.cc`, "
            "`deploy/helm/lockd/ci/*-values.yaml`, build/service/lockd and bench/RESULTS.md.")
        self.assertEqual(links, [("api.md", "sessions")])
        self.assertEqual(heading_anchors("# C++ client (`lockd::client`)\n"
                                         "## Leases, fencing: rules\n```sh\n# not one\n```\n"),
                         {"c-client-lockdclient", "leases-fencing-rules"})
        self.assertEqual(words, ["service/validation.h", "bench/RESULTS.md"])
        comments = code_comments("x.cc", '#include "service/a.h"\nint x;  // see util/log.h\n')
        self.assertEqual(PATH_WORD.findall(comments), ["util/log.h"])
        comments = code_comments("x.py",
                                 '"""Uses tests/support/a.py."""\nx = "tools/b.py"  # c/d.py\n')
        self.assertEqual(PATH_WORD.findall(comments), ["tests/support/a.py"])
        self.assertEqual(cited_api_sections('(docs/api.md "Names", "Owner",\n "Lease") and\n'
                                            'docs/api.md, "Sessions"; docs/api.md alone'),
                         ["Names", "Owner", "Lease", "Sessions"])


if __name__ == "__main__":
    unittest.main()
