# -*- coding: utf-8 -*-
"""CPU lists: the one strict parser, the lenient reader of what the kernel wrote, the formatter."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import format_cpulist, parse_cpulist, read_cpulist


@pytest.mark.parametrize("value, expected", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("5", [5]), (5, [5]), ([3, 1, 1], [1, 3]), ("", []), (None, []),
    (" 0 - 1 , 4", [0, 1, 4]), ([2, "4-5"], [2, 4, 5]),
])
def test_parse_cpulist(value, expected):
    assert parse_cpulist(value) == expected


@pytest.mark.parametrize("value, message", [
    ("x", "is not a CPU list"), ("3-1", "is not a CPU list"), (True, "is not a CPU list"), ([False], "is not a CPU number"),
    ("-1", "cannot be negative"), ([-1], "cannot be negative"), ("0-99999999", "beyond this host's CPUs"),
])
def test_parse_cpulist_refuses(value, message):
    with pytest.raises(InputError, match=message):
        parse_cpulist(value, what="cpus")


def test_bound_is_checked_before_expanding():
    with pytest.raises(InputError, match=r"CPU 4 is beyond this host's CPUs \(0-3\)"):
        parse_cpulist("0-4", bound=4)


@pytest.mark.parametrize("text, expected", [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("", []), ("x", []), ("5", [5]),
                                            (None, []), ("0-1\n", [0, 1])])
def test_read_cpulist(text, expected):
    assert read_cpulist(text) == expected


@pytest.mark.parametrize("cpus, text", [([0, 1, 2, 5], "0-2,5"), ([], ""), ([7], "7"), ([3, 2, 2, 1], "1-3")])
def test_format_cpulist(cpus, text):
    assert format_cpulist(cpus) == text
    assert parse_cpulist(text) == sorted(set(cpus))
