# -*- coding: utf-8 -*-
"""What libvirt_host needs to know of the host, read through the host seam's commands: the
package family, the missing packages, the service's enabled/active state. The answers of a
bare host and systemctl's are the captures in tests/fixtures/libvirt_service/ (see their
.source.txt)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.service import PACKAGES, read_service, wanted_packages

from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.packages import debian_libvirt  # pylint: disable=import-error

DEFAULTS = {"name": "libvirtd", "packages": None, "uefi": False}


def read(tmp_path, replies, programs=(), options=None):
    commands = RecordedCommands(programs=programs, replies=replies)
    return read_service(Host(str(tmp_path), commands=commands), dict(DEFAULTS, **(options or {}))), commands


@pytest.mark.parametrize("missing, enabled, active", [
    ([], "enabled", "active"),
    (["python3-libvirt", "ovmf"], "disabled", "inactive"),
    (PACKAGES["Debian"] + ["ovmf"], None, None),
])
def test_debian_host(tmp_path, missing, enabled, active):
    wanted = PACKAGES["Debian"] + ["ovmf"]
    replies = debian_libvirt(missing, enabled, active, packages=wanted)
    state, commands = read(tmp_path, replies, options={"uefi": True})
    assert state == {"family": "Debian", "packages": wanted, "missing": missing, "enabled": enabled or "", "active": active or ""}
    # one query for the whole list, one systemctl for both states
    assert commands.ran("dpkg-query") == [replies[0].argv]
    assert commands.ran("systemctl") == [["systemctl", "show", "-p", "Id,LoadState,UnitFileState,ActiveState", "libvirtd"]]


def test_a_unit_that_does_not_exist_reads_as_is_enabled_and_is_active_print_it(tmp_path):
    state, _commands = read(tmp_path, debian_libvirt(PACKAGES["Debian"], enabled="", packages=PACKAGES["Debian"]))
    assert (state["missing"], state["enabled"], state["active"]) == (PACKAGES["Debian"], "", "inactive")


def test_redhat_host_with_its_own_package_list(tmp_path):
    replies = [(["rpm", "-q", "libvirt"], 0, "", ""), (["rpm", "-q", "qemu-kvm"], 1, "", "")]
    state, _commands = read(tmp_path, replies + debian_libvirt(packages=[])[-2:], options={"packages": ["libvirt", "qemu-kvm"]})
    assert (state["family"], state["packages"], state["missing"]) == ("RedHat", ["libvirt", "qemu-kvm"], ["qemu-kvm"])


def test_a_host_without_dpkg_rpm_or_systemctl_is_read_not_failed(tmp_path):
    state, commands = read(tmp_path, [])
    assert state == {"family": "unknown", "packages": [], "missing": [], "enabled": "", "active": ""}
    assert commands.calls == []


def test_wanted_packages():
    assert wanted_packages("RedHat", uefi=True) == PACKAGES["RedHat"] + ["edk2-ovmf"]
    assert wanted_packages("Debian", ["libvirt-daemon"]) == ["libvirt-daemon"]
    assert wanted_packages("unknown", uefi=True) == []
