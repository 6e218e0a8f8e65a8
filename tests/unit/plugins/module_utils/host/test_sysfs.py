# -*- coding: utf-8 -*-
"""Reads under a root over a FakeHost tree: missing files, links, globs, paths back to the host's."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

from fakes.host_tree import FakeHost  # pylint: disable=import-error


@pytest.fixture
def tree(tmp_path):
    host = FakeHost(tmp_path)
    host.add_pci("0000:82:00.0", "0x1234", "0x11e8", "0x00ff00", root_bus="pci0000:80", numa_node=1,
                 driver="pci-stub", iommu_group=7)
    return host, Sysfs(str(tmp_path))


def test_read_and_defaults(tree):
    host, fs = tree
    assert fs.read("/proc/sys/kernel/osrelease") == "6.1.0-fake"
    assert fs.read("/nowhere") is None and fs.read("/nowhere", "") == ""
    host.write("/sys/x/count", "17")
    host.write("/sys/x/hex", "0x1f")
    assert fs.read_int("/sys/x/count") == 17 and fs.read_int("/sys/x/hex", base=16) == 31
    assert fs.read_int("/proc/sys/kernel/osrelease", default=-1) == -1 and fs.read_int("/nowhere", default=0) == 0


def test_read_error_names_the_errno(tree):
    _host, fs = tree
    assert fs.read_error("/proc/cmdline") is None and fs.read_error("/nowhere") == "ENOENT"


def test_links_and_listings(tree):
    _host, fs = tree
    base = "/sys/bus/pci/devices/0000:82:00.0"
    assert fs.readlink_name(base + "/driver") == "pci-stub" and fs.readlink_name(base + "/nowhere") is None
    assert fs.readlink_name(base + "/iommu_group") == "7"
    assert fs.realpath(base).startswith("/sys/devices/pci0000:80/") and fs.realpath("/nowhere") is None
    assert fs.listdir("/sys/bus/pci/devices") == ["0000:82:00.0"] and fs.listdir("/nowhere") == []
    assert fs.exists(base) and fs.isdir(base) and not fs.exists("/nowhere")


def test_paths_and_globs(tmp_path, tree):
    host, fs = tree
    host.write("/boot/efi/EFI/rocky/grub.cfg", "# generated")
    host.write("/boot/efi/EFI/debian/grub.cfg", "# generated")
    assert fs.path("/etc/default/grub") == os.path.join(str(tmp_path), "etc/default/grub") and fs.path("/") == str(tmp_path)
    assert fs.glob("/boot/efi/EFI/*/grub.cfg") == ["/boot/efi/EFI/debian/grub.cfg", "/boot/efi/EFI/rocky/grub.cfg"]
    assert fs.glob("/etc/default/grub.d/*.cfg") == []
    assert Sysfs("/").glob("/proc/self/cmdline") == ["/proc/self/cmdline"]


def test_reads_through_a_link_that_leaves_the_root_find_nothing(tmp_path):
    """An absolute sysfs link in a capture points at the machine the tree was copied to."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (outside / "0000:81:00.0").mkdir(parents=True)
    (outside / "0000:81:00.0" / "vendor").write_text("0x10de\n")
    (root / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    link = root / "sys" / "bus" / "pci" / "devices" / "0000:81:00.0"
    link.symlink_to(str(outside / "0000:81:00.0"))
    fs = Sysfs(str(root))
    device = "/sys/bus/pci/devices/0000:81:00.0"
    assert fs.read(device + "/vendor") is None and fs.read_int(device + "/vendor", base=16) is None
    assert fs.listdir(device) == [] and not fs.isdir(device) and fs.realpath(device) is None
    assert fs.read_error(device + "/vendor") == "ENOENT"
    assert fs.exists(device)  # the link itself is in the tree
    assert fs.glob("/sys/bus/pci/devices/*/vendor") == []


def test_link_target_reads_a_link_without_resolving_it(tmp_path, tree):
    """A /proc/PID/fd link names its file outright: a host path back, pseudo-files as they read."""
    host, fs = tree
    os.makedirs(host.p("/proc/777/fd"))
    host.write("/dev/vfio/7", "")
    os.symlink(host.p("/dev/vfio/7"), host.p("/proc/777/fd/31"))
    os.symlink("socket:[4242]", host.p("/proc/777/fd/3"))
    os.symlink(str(tmp_path.parent / "elsewhere"), host.p("/proc/777/fd/4"))
    assert fs.link_target("/proc/777/fd/31") == "/dev/vfio/7"
    assert fs.link_target("/proc/777/fd/3") == "socket:[4242]"
    assert fs.link_target("/proc/777/fd/4") is None  # outside the root
    assert fs.link_target("/dev/vfio/7") is None and fs.link_target("/proc/777/fd/9") is None  # no link, nothing
    # on the host itself a target is as the kernel gives it
    assert Sysfs("/").link_target("/proc/self/exe") == os.readlink("/proc/self/exe")
