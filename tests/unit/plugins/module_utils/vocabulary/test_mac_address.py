# -*- coding: utf-8 -*-
"""mac_address: the one reader of a MAC address input."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.mac_address import check_mac, duplicates, is_mac, is_unset


@pytest.mark.parametrize("value, expected", [("52:54:00:AB:cd:01", "52:54:00:ab:cd:01"), ("02:00:00:00:00:01", "02:00:00:00:00:01")])
def test_a_unicast_mac_is_taken_in_lower_case(value, expected):
    assert check_mac(value, "mac") == expected


@pytest.mark.parametrize("value, words", [
    ("52:54:00:00:01", "is not a MAC address"),
    ("52:54:00:00:00:01\n", "is not a MAC address"),
    ("52-54-00-00-00-01", "is not a MAC address"),
    (None, "is not a MAC address"),
    (525400000001, "is not a MAC address"),
    ("00:00:00:00:00:00", "all-zero address"),
    ("ff:ff:ff:ff:ff:ff", "broadcast"),
    ("01:00:5e:00:00:01", "multicast"),
    ("33:33:00:00:00:01", "multicast"),
])
def test_bad_macs_name_the_input(value, words):
    with pytest.raises(InputError) as err:
        check_mac(value, "vfs[2].mac")
    assert str(err.value).startswith("vfs[2].mac: ") and words in str(err.value)


def test_form_unset_and_duplicates():
    assert is_mac("AA:bb:cc:dd:ee:ff") and not is_mac("aa:bb:cc:dd:ee:ff ")
    assert is_unset(None) and is_unset("00:00:00:00:00:00") and not is_unset("52:54:00:00:00:01")
    owners = [("52:54:00:00:00:01", "a"), ("52:54:00:00:00:02", "b"), ("52:54:00:00:00:01", "c"), ("00:00:00:00:00:00", "d"),
              ("00:00:00:00:00:00", "e")]
    assert duplicates(owners) == [("52:54:00:00:00:01", ["a", "c"])]
