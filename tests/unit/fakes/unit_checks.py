# -*- coding: utf-8 -*-
"""Checks of generated boot files by their readers' own tools: systemd units through the real
``systemd-analyze verify`` (the Debian package systemd, in scripts/bootstrap.sh's list), udev
rules through the real ``udevadm verify`` of systemd 254 or later (Debian 12's udev 252 has no
``verify``: scripts/bootstrap.sh extracts bookworm-backports' udevadm into .build/udev-verify,
nothing installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

UDEVADM = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", ".build", "udev-verify", "bin", "udevadm")


def udevadm_verify(rules_text):
    """``udevadm verify`` (its style checks included) of a rules file holding ``rules_text``:
    (rc, output)."""
    assert os.access(UDEVADM, os.X_OK), "%s is missing: run scripts/bootstrap.sh (it extracts udevadm 254)" % UDEVADM
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "99-under-test.rules")
        with open(path, "w") as rules:
            rules.write(rules_text)
        proc = subprocess.run([UDEVADM, "verify", "--resolve-names=never", path], capture_output=True, text=True,
                              check=False, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def systemd_analyze():
    path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze is missing: install the Debian package systemd (scripts/bootstrap.sh lists it)"
    return path


def systemd_verify(unit_paths):
    """``systemd-analyze verify`` over unit files (copied into one directory, as systemd loads
    a unit by its file name): (rc, output)."""
    directory = os.path.dirname(unit_paths[0])
    proc = subprocess.run([systemd_analyze(), "verify"] + [os.path.join(directory, os.path.basename(p)) for p in unit_paths],
                          capture_output=True, text=True, check=False, env=dict(os.environ, SYSTEMD_LOG_LEVEL="notice"),
                          timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def systemd_escape_path(path):
    """``systemd-escape --path``, the real program."""
    return subprocess.run(["systemd-escape", "--path", "--", path], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()
