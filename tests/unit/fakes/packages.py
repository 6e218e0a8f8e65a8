# -*- coding: utf-8 -*-
"""Replies (for :class:`fakes.commands.RecordedCommands`) of a host's package manager and
systemctl, as the libvirt service read and mlx_rocev2 ask them: dpkg-query's answers in the shapes
captured in tests/fixtures/libvirt_service/debian12_dpkg_query_batch.json (one query for a list:
a line per installed package, sorted by name; a stderr line per package it does not know; exit
status 1 then; see its .source.txt), systemctl's state words as systemctl(1) documents them and
the bare host's answers of tests/fixtures/libvirt_service/debian12_bare.json."""

from __future__ import annotations

import json
import os

from fakes.commands import Reply  # pylint: disable=import-error

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "libvirt_service")
with open(os.path.join(FIXTURES, "debian12_bare.json"), encoding="utf-8") as _handle:
    BARE = json.load(_handle)
with open(os.path.join(FIXTURES, "debian12_dpkg_query_batch.json"), encoding="utf-8") as _handle:
    BATCH = json.load(_handle)["dpkg_batch"]
DEBIAN_LIBVIRT = ["libvirt-daemon-system", "qemu-system-x86", "python3-libvirt", "libxml2-utils"]
# the captured query's format, its line for bash (installed) and its line for libvirt-daemon-system (unknown)
DPKG_ARGV = BATCH["argv"][:3]
_INSTALLED_LINE = [line for line in BATCH["out"].splitlines() if line.startswith("bash\t")][0]
_UNKNOWN_LINE = BATCH["err"].splitlines()[0]


def dpkg(packages, missing=()):
    """``dpkg-query -W`` of ``packages`` on a Debian host where those of ``missing`` are not installed."""
    installed = sorted(p for p in packages if p not in missing)
    out = "".join(_INSTALLED_LINE.replace("bash", p) + "\n" for p in installed)
    err = "".join(_UNKNOWN_LINE.replace("libvirt-daemon-system", p) + "\n" for p in packages if p in missing)
    return Reply(DPKG_ARGV + list(packages), 1 if err else 0, out, err)


def systemctl(verb, state, unit="libvirtd"):
    """``systemctl is-enabled|is-active UNIT``: the unit's state word, or the bare host's capture
    (no unit, no systemd) when ``state`` is None."""
    if state is None:
        capture = BARE["systemctl_is_enabled_no_unit" if verb == "is-enabled" else "systemctl_is_active_no_systemd"]
        return Reply(["systemctl", verb, unit], capture["rc"], capture["out"], capture["err"])
    return Reply(["systemctl", verb, unit], 0 if state in ("enabled", "active") else 3, state + "\n", "")


def debian_libvirt(missing=(), enabled="enabled", active="active", packages=None):
    """Every reply of a Debian host with ``packages`` (default DEBIAN_LIBVIRT) installed but ``missing``."""
    packages = DEBIAN_LIBVIRT if packages is None else packages
    return ([dpkg(packages, missing)] if packages else []) + [systemctl("is-enabled", enabled), systemctl("is-active", active)]
