# -*- coding: utf-8 -*-
"""Replies (for :class:`fakes.commands.RecordedCommands`) of a host's package manager and
systemctl, as the libvirt service read asks them: dpkg-query's answers as captured in
tests/fixtures/libvirt_service/debian12_bare.json (see its .source.txt), systemctl's state
words as systemctl(1) documents them."""

from __future__ import annotations

import json
import os

from fakes.commands import Reply  # pylint: disable=import-error

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "libvirt_service", "debian12_bare.json")
with open(FIXTURE, encoding="utf-8") as _handle:
    BARE = json.load(_handle)
DEBIAN_LIBVIRT = ["libvirt-daemon-system", "qemu-system-x86", "python3-libvirt", "libxml2-utils"]


def dpkg(package, installed):
    capture = BARE["dpkg_installed" if installed else "dpkg_missing"]
    return Reply(["dpkg-query", "-W", "-f=${Status}", package], capture["rc"], capture["out"], capture["err"])


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
    return [dpkg(p, p not in missing) for p in packages] + [systemctl("is-enabled", enabled), systemctl("is-active", active)]
