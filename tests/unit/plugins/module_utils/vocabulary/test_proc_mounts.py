# -*- coding: utf-8 -*-
"""proc_mounts: the rows of /proc/mounts, the kernel's octal escapes undone."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.proc_mounts import mount_rows, unescape


def test_rows_and_their_options():
    text = ("sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"
            "hugetlbfs /dev/hugepages1G hugetlbfs rw,relatime,pagesize=1024M 0 0\n"
            "short line\n")
    rows = mount_rows(text)
    assert [(r["source"], r["mountpoint"], r["fstype"]) for r in rows] == [
        ("sysfs", "/sys", "sysfs"), ("hugetlbfs", "/dev/hugepages1G", "hugetlbfs")]
    assert "pagesize=1024M" in rows[1]["options"]


def test_escapes_are_undone():
    assert unescape(r"/mnt/a\040b\011c\134d") == "/mnt/a b\tc\\d"
    assert mount_rows(r"/dev/sdb1 /media/my\040disk ext4 rw 0 0")[0]["mountpoint"] == "/media/my disk"
