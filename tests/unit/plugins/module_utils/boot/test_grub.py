# -*- coding: utf-8 -*-
"""The iommu_grub feature's inputs: the vendor from a tree's /proc/cpuinfo or IOMMU table, and
the operations its options ask for."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import grub
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

from fakes.host_tree import FakeHost  # pylint: disable=import-error

PARAMS = {"vendor": "auto", "iommu": True, "passthrough": None, "pre_bind_ids": ["1234:11e8"],
          "pre_bind_driver": "pci-stub", "args": []}


@pytest.mark.parametrize("cpuinfo, table, vendor", [
    ("vendor_id\t: GenuineIntel\n", None, "intel"),
    ("vendor_id\t: AuthenticAMD\n", "DMAR", "amd"),  # cpuinfo wins
    ("vendor_id\t: VirtualApple\n", "DMAR", "intel"),
    ("BogoMIPS\t: 50.00\n", "IVRS", "amd"),
    ("vendor_id\t: VirtualApple\n", None, "virtualapple"),
    ("BogoMIPS\t: 50.00\n", None, None),
])
def test_detect_vendor(tmp_path, cpuinfo, table, vendor):
    host = FakeHost(tmp_path)
    host.write("/proc/cpuinfo", cpuinfo)
    if table:
        host.write("/sys/firmware/acpi/tables/" + table, "")
    assert grub.detect_vendor(Sysfs(str(tmp_path))) == vendor


def test_ops_for_the_lab(tmp_path):
    FakeHost(tmp_path).set_cpuinfo("GenuineIntel")
    vendor, ops = grub.iommu_grub_ops(PARAMS, Sysfs(str(tmp_path)))
    assert vendor == "intel"
    after = ops[0].apply(["intel_iommu=off"])
    for op in ops[1:]:
        after = op.apply(after)
    assert after == ["intel_iommu=on", "iommu=pt", "pci-stub.ids=1234:11e8"]


def test_unknown_vendor_is_an_input_error(tmp_path):
    FakeHost(tmp_path).write("/proc/cpuinfo", "BogoMIPS\t: 50.00\n")
    with pytest.raises(InputError, match="vendor_id missing\\); set vendor: intel or vendor: amd"):
        grub.iommu_grub_ops(PARAMS, Sysfs(str(tmp_path)))
