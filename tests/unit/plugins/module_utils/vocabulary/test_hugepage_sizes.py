# -*- coding: utf-8 -*-
"""Hugepage size names: the collection's, sysfs's and the kernel command line's."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.hugepage_sizes import (
    SIZE_NAMES, SIZES_KB, SYSFS_NAMES, name_of_kb, size_name)


def test_tables():
    assert SIZE_NAMES == ("2M", "1G")
    assert SYSFS_NAMES == {"2M": "2048kB", "1G": "1048576kB"}
    assert SIZES_KB == {"2M": 2048, "1G": 1048576}


@pytest.mark.parametrize("value, name", [("2M", "2M"), ("1g", "1G"), ("2048kB", "2M"), (2048, "2M"), ("1048576k", "1G"),
                                         ("2 MB", "2M")])
def test_size_name(value, name):
    assert size_name(value) == name


@pytest.mark.parametrize("value", [None, "none", "", "off"])
def test_size_name_none(value):
    assert size_name(value, allow_none=True) is None


@pytest.mark.parametrize("value", ["4M", None, "16G"])
def test_size_name_refuses(value):
    with pytest.raises(InputError, match="is not a hugepage size; use 2M or 1G"):
        size_name(value, what="hugepage_size")


def test_name_of_kb():
    assert name_of_kb(2048) == "2M" and name_of_kb(1048576) == "1G" and name_of_kb(64) is None
