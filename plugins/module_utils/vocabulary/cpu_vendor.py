# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CPU vendor, which decides the IOMMU's kernel argument (``intel_iommu``/``amd_iommu``), and
whether the host is a virtual machine (whose IOMMU is the hypervisor's to give, not a BIOS setting)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# ACPI table of the platform's IOMMU: DMAR describes Intel VT-d, IVRS AMD-Vi.
IOMMU_TABLES = (("DMAR", "intel"), ("IVRS", "amd"))


def vendor_of_cpuinfo(text):
    """``intel`` / ``amd`` from the first ``vendor_id`` line of /proc/cpuinfo, else the raw
    vendor id in lower case; None when there is no such line (arm64 has none)."""
    for line in (text or "").splitlines():
        key, _sep, value = line.partition(":")
        if key.strip() == "vendor_id":
            value = value.strip()
            if value == "GenuineIntel":
                return "intel"
            if value in ("AuthenticAMD", "HygonGenuine"):
                return "amd"
            return value.lower() or None
    return None


def virtual_machine(cpuinfo, sys_vendor=None):
    """The hypervisor's name when /proc/cpuinfo's ``flags`` hold ``hypervisor`` (the CPUID bit x86
    hypervisors set for their guests): the DMI system vendor (``/sys/class/dmi/id/sys_vendor``:
    ``QEMU``, ``VMware, Inc.``, ...) or ``unknown``; None on bare metal or a CPU that says nothing
    (no ``flags`` line: arm64)."""
    for line in (cpuinfo or "").splitlines():
        key, _sep, value = line.partition(":")
        if key.strip() == "flags":
            if "hypervisor" in value.split():
                return (sys_vendor or "").strip() or "unknown"
            return None
    return None
