# -*- coding: utf-8 -*-
"""The CPU vendor from /proc/cpuinfo's vendor_id line (the kernel's x86 vendor strings), and whether
the host is a virtual machine (the ``hypervisor`` CPU flag, the DMI system vendor naming it)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpu_vendor import IOMMU_TABLES, vendor_of_cpuinfo, virtual_machine


@pytest.mark.parametrize("text, vendor", [
    ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n", "intel"),
    ("processor\t: 0\nvendor_id\t: AuthenticAMD\n", "amd"),
    ("vendor_id\t: HygonGenuine\n", "amd"),
    ("vendor_id\t: VirtualApple\n", "virtualapple"),
    ("processor\t: 0\nBogoMIPS\t: 50.00\n", None),  # arm64 has no vendor_id line
    ("", None),
    (None, None),
])
def test_vendor_of_cpuinfo(text, vendor):
    assert vendor_of_cpuinfo(text) == vendor


def test_iommu_tables():
    assert dict(IOMMU_TABLES) == {"DMAR": "intel", "IVRS": "amd"}


# the flags lines of the lab VM's capture (QEMU TCG, tests/fixtures/lab/bare.tar) and of bare metal
VM_FLAGS = "vendor_id\t: GenuineIntel\nflags\t\t: fpu de pse tsc msr pae rdrand hypervisor lahf_lm\n"
METAL_FLAGS = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu vme de pse tsc msr pae svm extapic\n"


@pytest.mark.parametrize("cpuinfo, sys_vendor, machine", [
    (VM_FLAGS, "QEMU", "QEMU"),
    (VM_FLAGS, "VMware, Inc.\n", "VMware, Inc."),
    (VM_FLAGS, None, "unknown"),             # no DMI (a capture taken before it was captured)
    (METAL_FLAGS, "Supermicro", None),       # bare metal: its DMI vendor is a board maker
    ("processor\t: 0\nBogoMIPS\t: 50.00\n", "QEMU", None),  # arm64: no flags line, nothing said
    ("", None, None),
])
def test_virtual_machine(cpuinfo, sys_vendor, machine):
    assert virtual_machine(cpuinfo, sys_vendor) == machine
