# -*- coding: utf-8 -*-
"""Every doc the built collection ships (Markdown and reStructuredText: README.md, docs/, the
role and project READMEs, the docsite, the changelog) names only files the collection ships:
a user of the installed collection is never told to run or read a file they do not have. Pages
and sections for a checkout of the repository (the lab, the tests, development) say so: a page
whose first lines say "checkout", or a section whose heading does, may name the repository's
other files."""

from __future__ import annotations

import re
import subprocess
import tarfile

import pytest

import built_collection  # pylint: disable=import-error

# A path-like word: one with a slash, or a file name with an extension.
WORD = re.compile(r"(?<![\w/.~$<{-])\.?[\w-]+(?:\.[\w-]+)*(?:/[\w.*-]*)+|(?<![\w/.~$<{-])[\w-]+\.(?:txt|cfg|ini|sh|py)\b")
MD_HEADING = re.compile(r"^(#+)\s+(.*)$")
RST_UNDERLINE = re.compile(r"^([=\-~^+#*])\1{2,}\s*$")
CHECKOUT = re.compile(r"\bcheckout\b", re.IGNORECASE)
# Pages that name unshipped files and are another change's to fix (the stage guides, rewritten
# with the stages; the changelog's released entries are history). Each must still need it.
PENDING = {
    "CHANGELOG.rst": "released changelog entries (history, not instructions)",
    "docs/ARCHITECTURE.md": "the stage rewrite",
    "docs/boot.md": "the stage rewrite", "docs/docsite/rst/boot.rst": "the stage rewrite (from docs/boot.md)",
    "docs/sriov_vfio.md": "the stage rewrite", "docs/docsite/rst/sriov_vfio.rst": "the stage rewrite (from docs/sriov_vfio.md)",
    "docs/tenants.md": "the stage rewrite", "docs/docsite/rst/tenants.rst": "the stage rewrite (from docs/tenants.md)",
}


def shipped():
    with tarfile.open(built_collection.artifact()) as tar:
        files = set(member.name for member in tar.getmembers() if member.isfile())
        docs = dict((name, tar.extractfile(name).read().decode("utf-8")) for name in files if name.endswith((".md", ".rst")))
    return files, docs


def unshipped(files):
    """The repository's tracked files the artifact leaves out, and their folders that hold nothing shipped."""
    tracked = set(subprocess.run(["git", "ls-files"], cwd=built_collection.REPO, capture_output=True, text=True,
                                 check=True).stdout.split())
    left_out = tracked - files
    shipped_dirs = set(name.rsplit("/", depth)[0] for name in files for depth in range(1, name.count("/") + 1))
    folders = set(name.rsplit("/", depth)[0] for name in left_out for depth in range(1, name.count("/") + 1)) - shipped_dirs
    return left_out, folders


def checkout_lines(text, rst):
    """Line numbers (1-based) inside a section whose heading says it is for a checkout, or all
    of them when the page's first five lines say so."""
    lines = text.splitlines()
    titles = set(number for number, line in enumerate(lines, 1)
                 if MD_HEADING.match(line) and not rst or rst and number < len(lines) and RST_UNDERLINE.match(lines[number]))
    if any(CHECKOUT.search(line) for number, line in enumerate(lines[:5], 1) if number not in titles):
        return set(range(1, len(lines) + 1))
    allowed, level_open = set(), None
    for number, line in enumerate(lines, 1):
        heading = None
        if rst and number < len(lines) and RST_UNDERLINE.match(lines[number]) and line.strip() and not RST_UNDERLINE.match(line):
            heading = (lines[number][0], line)
        elif not rst:
            match = MD_HEADING.match(line)
            heading = (len(match.group(1)), match.group(2)) if match else None
        if heading:
            level, title = heading
            if level_open is not None and (level == level_open or (not rst and level < level_open)):
                level_open = None
            if level_open is None and CHECKOUT.search(title):
                level_open = level
        if level_open is not None:
            allowed.add(number)
    return allowed


def problems(name, text, left_out, folders):
    found = []
    allowed = checkout_lines(text, name.endswith(".rst"))
    for number, line in enumerate(text.splitlines(), 1):
        if number in allowed:
            continue
        for match in WORD.finditer(line):
            word = match.group(0).rstrip(".,:;)").rstrip("/")
            if word in left_out or word in folders or any(word.startswith(folder + "/") for folder in folders):
                found.append("%s:%d: %s" % (name, number, word))
    return found


@pytest.fixture(scope="module")
def collection():
    files, docs = shipped()
    left_out, folders = unshipped(files)
    return docs, left_out, folders


def test_shipped_docs_name_only_shipped_files(collection):
    docs, left_out, folders = collection
    found = [line for name in sorted(docs) if name not in PENDING for line in problems(name, docs[name], left_out, folders)]
    assert found == [], "\n".join(found)


def test_each_pending_page_still_names_an_unshipped_file(collection):
    docs, left_out, folders = collection
    done = [name for name in PENDING if name not in docs or not problems(name, docs[name], left_out, folders)]
    assert done == [], "no longer pending, remove from PENDING: %s" % done


@pytest.mark.parametrize("text, rst, found", [
    ("Run `tests/tools/dgx_tree.py DIR`.\n", False, 1),
    ("# Tests (in a checkout)\n\nRun `tests/tools/dgx_tree.py DIR`.\n\n# Use\n\nscripts/test.sh\n", False, 1),
    ("For a checkout of the repository.\n\nscripts/test.sh lab\n", False, 0),
    ("Tests, in a checkout\n--------------------\n\nscripts/test.sh\n\nUse\n---\n\nplaybooks/site.yml lab/x\n", True, 1),
    ("See playbooks/site.yml and roles/preflight/README.md.\n", False, 0),
])
def test_the_check_finds_unshipped_names(text, rst, found):
    left_out = {"tests/tools/dgx_tree.py", "scripts/test.sh", "lab/x"}
    folders = {"tests", "tests/tools", "scripts", "lab"}
    assert len(problems("page.rst" if rst else "page.md", text, left_out, folders)) == found
