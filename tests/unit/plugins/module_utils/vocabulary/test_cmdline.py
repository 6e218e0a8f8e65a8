# -*- coding: utf-8 -*-
"""The one kernel command-line split, over the lab's /proc/cmdline and the kernel's quoting."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import join_cmdline, kernel_part, split_cmdline


@pytest.mark.parametrize("text,expected", [
    ("BOOT_IMAGE=/vmlinuz root=UUID=1 ro quiet", ["BOOT_IMAGE=/vmlinuz", "root=UUID=1", "ro", "quiet"]),
    ('a="x y"  b\n', ['a="x y"', "b"]),
    ("", []),
    (None, []),
])
def test_split_cmdline(text, expected):
    assert split_cmdline(text) == expected


def test_join_is_the_inverse_of_split():
    args = ["console=ttyS0,115200n8", 'dyndbg="file a.c +p"', "quiet"]
    assert split_cmdline(join_cmdline(args)) == args


def test_init_args_after_double_dash_are_not_kernel_args():
    assert kernel_part("ro quiet -- --init-flag intel_iommu=on".split()) == ["ro", "quiet"]
    assert kernel_part(["ro"]) == ["ro"]
