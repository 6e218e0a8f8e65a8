# -*- coding: utf-8 -*-
"""Replies (for :class:`fakes.commands.RecordedCommands`) of a host's package manager and
systemctl, as the libvirt service read and mlx_rocev2 ask them: dpkg-query's answers in the shapes
captured in tests/fixtures/libvirt_service/debian12_dpkg_query_batch.json (one query for a list:
a line per installed package, sorted by name; a stderr line per package it does not know; exit
status 1 then; see its .source.txt) and ``systemctl show`` as captured in
tests/fixtures/libvirt_service/debian12_systemctl_show.json (a running, a disabled and a missing
unit, and a host where systemd is not running)."""

from __future__ import annotations

import json
import os

from fakes.commands import Reply  # pylint: disable=import-error

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "libvirt_service")
with open(os.path.join(FIXTURES, "debian12_dpkg_query_batch.json"), encoding="utf-8") as _handle:
    BATCH = json.load(_handle)["dpkg_batch"]
with open(os.path.join(FIXTURES, "debian12_systemctl_show.json"), encoding="utf-8") as _handle:
    SHOW = json.load(_handle)
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


def systemctl_show(enabled="enabled", active="active", unit="libvirtd"):
    """``systemctl show -p Id,LoadState,UnitFileState,ActiveState UNIT`` as captured in
    debian12_systemctl_show.json: the lab's answer for a loaded unit with ``enabled`` and
    ``active`` put in, the capture of a unit that does not exist when ``enabled`` is "", and of
    a host where systemd is not running when ``enabled`` is None."""
    if enabled is None:
        capture = SHOW["no_systemd"]
    elif enabled == "":
        capture = SHOW["no_unit"]
    else:
        capture = dict(SHOW["running"], out=SHOW["running"]["out"].replace("UnitFileState=enabled", "UnitFileState=" + enabled)
                       .replace("ActiveState=active", "ActiveState=" + active))
    out = capture["out"].replace(capture["argv"][-1] + ".service", unit + ".service")
    return Reply(capture["argv"][:-1] + [unit], capture["rc"], out, capture["err"])


def debian_libvirt(missing=(), enabled="enabled", active="active", packages=None):
    """Every reply of a Debian host with ``packages`` (default DEBIAN_LIBVIRT) installed but ``missing``."""
    packages = DEBIAN_LIBVIRT if packages is None else packages
    return ([dpkg(packages, missing)] if packages else []) + [systemctl_show(enabled, active)]
