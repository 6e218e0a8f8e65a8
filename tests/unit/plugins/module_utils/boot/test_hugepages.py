# -*- coding: utf-8 -*-
"""The pure parts of the hugepages feature: systemd path escaping, /proc/mounts, kernel
versions, node numbers."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages as hp
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

# /proc/mounts lines as the kernel prints them: hugetlbfs_show_options (fs/hugetlbfs/inode.c)
# writes pagesize= in K or M, so 2M pages show pagesize=2M and 1G pages pagesize=1024M.
PROC_MOUNTS = ("sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
               "hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"
               "hugetlbfs /dev/hugepages1G hugetlbfs rw,relatime,pagesize=1024M 0 0\n"
               "tmpfs /run tmpfs rw,nosuid,nodev,size=400000k,mode=755 0 0\n")


@pytest.mark.parametrize("path, name", [("/dev/hugepages1G", "dev-hugepages1G"), ("/mnt/huge pages", "mnt-huge\\x20pages"),
                                        ("/srv/a-b", "srv-a\\x2db"), ("/", "-"), ("/srv/é", "srv-\\xc3\\xa9")])
def test_systemd_escape(path, name):
    assert hp.systemd_escape_path(path) == name


def test_parse_mounts():
    hugetlbfs, others = hp.parse_mounts(PROC_MOUNTS, 2048)
    assert hugetlbfs == {"/dev/hugepages": 2048, "/dev/hugepages1G": 1048576}
    assert others == {"/sys": "sysfs", "/run": "tmpfs"}


def test_parse_mounts_default_size():
    hugetlbfs, _others = hp.parse_mounts("hugetlbfs /mnt/huge\\040pages hugetlbfs rw,relatime 0 0\n", 2048)
    assert hugetlbfs == {"/mnt/huge pages": 2048}


@pytest.mark.parametrize("release, version", [("6.1.0-28-amd64", (6, 1)), ("5.15.0-43-generic", (5, 15)), ("", None),
                                              (None, None)])
def test_kernel_version(release, version):
    assert hp.kernel_version(release) == version


@pytest.mark.parametrize("value, node", [(None, "all"), ("all", "all"), (" ALL ", "all"), (1, 1), ("3", 3)])
def test_parse_node(value, node):
    assert hp.parse_node(value, "pages[0]") == node


def test_parse_node_refuses():
    with pytest.raises(InputError, match="pages\\[0\\]: node 'one' is not a NUMA node number or all"):
        hp.parse_node("one", "pages[0]")
