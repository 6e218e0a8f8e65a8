# -*- coding: utf-8 -*-
"""The collection as a user gets it: the tarball a release holds (``ansible-galaxy collection
build`` of the files git would commit), and that tarball installed into an empty collections path,
run with an environment that sees nothing of the checkout. Built once per test run."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINDIR = os.path.dirname(sys.executable)
_BUILT = {}


def _work():
    if "work" not in _BUILT:
        _BUILT["work"] = tempfile.mkdtemp(prefix="gpuvirt-built.")
        atexit.register(shutil.rmtree, _BUILT["work"], True)
    return _BUILT["work"]


def artifact():
    """Path of the built tarball."""
    if "artifact" not in _BUILT:
        work = _work()
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout
        with open(os.path.join(work, "files"), "w", encoding="utf-8") as handle:
            handle.write(files)
        subprocess.run(["rsync", "-a", "--files-from=%s" % os.path.join(work, "files"), REPO + "/", os.path.join(work, "src") + "/"],
                       check=True)
        proc = subprocess.run([os.path.join(BINDIR, "ansible-galaxy"), "collection", "build", os.path.join(work, "src"),
                               "--output-path", os.path.join(work, "out")], capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [name] = [name for name in os.listdir(os.path.join(work, "out")) if name.endswith(".tar.gz")]
        _BUILT["artifact"] = os.path.join(work, "out", name)
    return _BUILT["artifact"]


def clean_env(collections):
    """The environment of a user who installed the artifact into ``collections`` and nothing else
    (the checkout's .build/collections, on PYTHONPATH, also holds gpuvirt.tenancy)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_CONFIG=os.path.join(str(collections), "ansible.cfg"))
    env.pop("PYTHONPATH", None)
    return env


def install(path):
    """Install the artifact into the empty directory ``path``; the process's result."""
    os.makedirs(str(path), exist_ok=True)
    with open(os.path.join(str(path), "ansible.cfg"), "w", encoding="utf-8") as handle:
        handle.write("[defaults]\n")
    return subprocess.run([os.path.join(BINDIR, "ansible-galaxy"), "collection", "install", artifact(), "-p", str(path)],
                          capture_output=True, text=True, env=clean_env(path), check=False, timeout=300)


def installed():
    """A collections path holding only the installed artifact."""
    if "installed" not in _BUILT:
        path = os.path.join(_work(), "collections")
        proc = install(path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _BUILT["installed"] = path
    return _BUILT["installed"]
