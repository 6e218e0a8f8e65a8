# -*- coding: utf-8 -*-
"""The collection as a user gets it: the tarball a release holds (``ansible-galaxy collection
build`` of the files git would commit), and that tarball installed into an empty collections path,
run with an environment that sees nothing of the checkout. Built once per test run.

The ansible-* commands a user runs are those of :func:`bindir`: where GPUVIRT_USER_WHEELHOUSE
names a folder of wheels (scripts/bootstrap.sh makes one beside each ansible-core line's
virtualenv), a fresh virtualenv made for this test run outside the checkout, holding only what the
README tells a user to install (ansible-core and libvirt-python of GPUVIRT_USER_REQUIREMENTS'
pins, from those wheels: no network); else the test's own Python's."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# what a user installs on the controller (README, "Requirements"): the rest comes with ansible-core
USER_PACKAGES = ("ansible-core", "libvirt-python")
_BUILT = {}


def _work():
    """This run's temporary folder (the tarball, its install, the user's virtualenv)."""
    if "work" not in _BUILT:
        _BUILT["work"] = tempfile.mkdtemp(prefix="gpuvirt-built.")
        atexit.register(shutil.rmtree, _BUILT["work"], True)
    return _BUILT["work"]


def _user_venv(wheelhouse, requirements):
    """A fresh virtualenv in this run's temporary folder with USER_PACKAGES at the pins of
    ``requirements``, installed from ``wheelhouse`` only; its bin folder."""
    with open(requirements, encoding="utf-8") as handle:
        pins = [line.strip() for line in handle if line.split("==")[0].strip() in USER_PACKAGES]
    assert len(pins) == len(USER_PACKAGES), "%s pins %s, not each of %s" % (requirements, pins, USER_PACKAGES)
    venv = os.path.join(_work(), "user-venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    proc = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", wheelhouse]
                          + pins, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, "the user's virtualenv from %s: %s" % (wheelhouse, proc.stdout + proc.stderr)
    return os.path.join(venv, "bin")


def bindir():
    """The folder of the ansible-* commands (and the Python) a user runs: see the module's docstring."""
    if "bindir" not in _BUILT:
        wheelhouse = os.environ.get("GPUVIRT_USER_WHEELHOUSE")
        if wheelhouse:
            _BUILT["bindir"] = _user_venv(wheelhouse, os.environ.get("GPUVIRT_USER_REQUIREMENTS") or os.path.join(REPO, "requirements.txt"))
        else:
            _BUILT["bindir"] = os.path.dirname(sys.executable)
    return _BUILT["bindir"]


def artifact():
    """Path of the built tarball."""
    if "artifact" not in _BUILT:
        folder = _work()
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout
        with open(os.path.join(folder, "files"), "w", encoding="utf-8") as handle:
            handle.write(files)
        subprocess.run(["rsync", "-a", "--files-from=%s" % os.path.join(folder, "files"), REPO + "/", os.path.join(folder, "src") + "/"],
                       check=True)
        proc = subprocess.run([os.path.join(bindir(), "ansible-galaxy"), "collection", "build", os.path.join(folder, "src"),
                               "--output-path", os.path.join(folder, "out")], capture_output=True, text=True, check=False, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [name] = [name for name in os.listdir(os.path.join(folder, "out")) if name.endswith(".tar.gz")]
        _BUILT["artifact"] = os.path.join(folder, "out", name)
    return _BUILT["artifact"]


def clean_env(collections):
    """The environment of a user who installed the artifact into ``collections`` and nothing else
    (the checkout's .build/collections, on PYTHONPATH, also holds gpuvirt.tenancy)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_CONFIG=os.path.join(str(collections), "ansible.cfg"))
    env.pop("PYTHONPATH", None)
    return env


def user_env(collections=None, **extra):
    """The environment a user runs the ansible-* commands in: :func:`clean_env` of ``collections``
    (default: the installed artifact), :func:`bindir` first on PATH, no colour, and ``extra``."""
    return dict(clean_env(collections or installed()), ANSIBLE_NOCOLOR="1", PATH=bindir() + os.pathsep + os.environ.get("PATH", ""),
                **extra)


# The tenants module's own warnings about previewed tenants (a bare capture's VFs have no BARs yet,
# the test driver keeps no <qemu:commandline>) are the preview's report.
MODULE_WARNING = "[WARNING]: tenants stage (checked by the gate): "


def other_warnings(output):
    """The warning lines of ``output`` but the tenants module's own (MODULE_WARNING)."""
    return [line for line in output.splitlines() if "WARNING]" in line and not line.startswith(MODULE_WARNING)]


def install(path):
    """Install the artifact into the empty directory ``path``; the process's result."""
    os.makedirs(str(path), exist_ok=True)
    with open(os.path.join(str(path), "ansible.cfg"), "w", encoding="utf-8") as handle:
        handle.write("[defaults]\n")
    return subprocess.run([os.path.join(bindir(), "ansible-galaxy"), "collection", "install", artifact(), "-p", str(path)],
                          capture_output=True, text=True, env=clean_env(path), check=False, timeout=300)


def installed():
    """A collections path holding only the installed artifact."""
    if "installed" not in _BUILT:
        path = os.path.join(_work(), "collections")
        proc = install(path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _BUILT["installed"] = path
    return _BUILT["installed"]
