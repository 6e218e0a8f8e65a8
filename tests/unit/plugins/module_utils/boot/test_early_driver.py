# -*- coding: utf-8 -*-
"""The pure parts of early_driver: which lines name the driver's module file, and the
initramfs-tools ``modules`` line added as lineinfile adds it (the role's earlier task)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import early_driver as ed


@pytest.mark.parametrize("name, listing, found", [
    ("pci-stub", "kernel/drivers/pci/pci-stub.ko\n", True),
    ("pci-stub", "kernel/drivers/pci/pci_stub.ko.zst\n", True),
    ("vfio-pci", "kernel/drivers/vfio/pci/vfio-pci-core.ko\n", False),
    ("vfio-pci", "kernel/drivers/vfio/pci/vfio-pci.ko\nkernel/drivers/vfio/vfio.ko\n", True),
    ("vfio_pci", "kernel/drivers/vfio/pci/vfio-pci.ko.xz\n", True),
    ("pci-stub", "kernel/drivers/pci/pci-stub.ko.bak/x\n", False),
])
def test_module_file_pattern(name, listing, found):
    assert bool(ed.module_file_pattern(name).search(listing)) is found


@pytest.mark.parametrize("before, after", [
    (None, "pci-stub\n"),
    ("", "pci-stub\n"),
    ("# modules\nloop", "# modules\nloop\npci-stub\n"),
    ("loop\npci-stub\n", "loop\npci-stub\n"),
    ("pci-stub\r\nloop\r\n", "pci-stub\r\nloop\r\n"),
    ("pci-stub-extra\n", "pci-stub-extra\npci-stub\n"),
])
def test_with_line(before, after):
    assert ed.with_line(before, "pci-stub") == after


@pytest.mark.parametrize("words, tool", [
    ({"debian"}, "initramfs-tools"), ({"ubuntu", "debian"}, "initramfs-tools"),
    ({"rocky", "rhel", "centos", "fedora"}, "dracut"), ({"arch"}, None), (set(), None),
])
def test_initramfs_tool(words, tool):
    assert ed.initramfs_tool(words) == tool
