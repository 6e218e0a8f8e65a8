# -*- coding: utf-8 -*-
"""captured_programs: the hypervisor's versions as a capture holds them (real outputs of
`libvirtd --version` and QEMU's `--version` in tests/fixtures/hypervisor), and the gate of
<maxphysaddr> (libvirt 8.7.0) on them."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host import captured_programs as cp
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "hypervisor")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def test_real_version_outputs_parse():
    assert cp.parse_libvirtd_version(fixture("libvirtd-version_ubuntu-22.04_libvirt-8.0.0.txt")) == "8.0.0"
    assert cp.parse_qemu_version(fixture("qemu-version_ubuntu-22.04_qemu-6.2.0.txt")) == "6.2.0"
    assert cp.parse_qemu_version(fixture("qemu-system-x86_64-version_ubuntu-24.04_qemu-8.2.2.txt")) == "8.2.2"


@pytest.mark.parametrize("text", ["", "libvirtd: command not found", "virsh 8.0.0", None])
def test_other_text_is_no_version(text):
    assert cp.parse_libvirtd_version(text) is None and cp.parse_qemu_version(text) is None


def test_a_capture_gives_the_versions_and_the_gate_follows_libvirt(tmp_path):
    os.makedirs(str(tmp_path / ".capture"))
    (tmp_path / ".capture" / cp.LIBVIRTD_VERSION).write_text(fixture("libvirtd-version_ubuntu-22.04_libvirt-8.0.0.txt"))
    (tmp_path / ".capture" / cp.QEMU_VERSION).write_text(fixture("qemu-version_ubuntu-22.04_qemu-6.2.0.txt"))
    versions = cp.hypervisor_versions(Sysfs(str(tmp_path)))
    assert versions == {"libvirt": "8.0.0", "qemu": "6.2.0", "captured": True}
    assert cp.maxphysaddr_supported(versions) is False
    assert "libvirt 8.0.0, QEMU 6.2.0" in cp.hypervisor_note(versions) and "not available" in cp.hypervisor_note(versions)
    assert cp.maxphysaddr_supported({"libvirt": "8.7.0", "qemu": "6.2.0"}) is True
    assert cp.maxphysaddr_supported({"libvirt": "10.0.0", "qemu": "8.2.2"}) is True


def test_no_capture_no_versions(tmp_path):
    versions = cp.hypervisor_versions(Sysfs(str(tmp_path)))
    assert versions == {"libvirt": None, "qemu": None, "captured": False}
    assert cp.maxphysaddr_supported(versions) is None and cp.hypervisor_note(versions) is None
    # the running host is never read from a capture directory
    assert cp.read_output(Sysfs("/"), cp.LIBVIRTD_VERSION) is None
