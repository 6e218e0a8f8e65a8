# -*- coding: utf-8 -*-
"""The CPU vendor from /proc/cpuinfo's vendor_id line (the kernel's x86 vendor strings)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpu_vendor import IOMMU_TABLES, vendor_of_cpuinfo


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
