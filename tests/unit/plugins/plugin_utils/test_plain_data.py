# -*- coding: utf-8 -*-
"""The controller's plain-data helpers: a flag as a play hands it over (the reboot budget's
host_boot_reboot_required, the fleet filters' check mode and tenants stage), and plain data."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import plain, play_true


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), (None, False), (1, True), (0, False),
    ("true", True), ("True", True), (" yes ", True), ("1", True), ("YES", True),
    ("false", False), ("no", False), ("0", False), ("", False), ("on", False), ("maybe", False),
])
def test_a_flag_as_a_play_hands_it_over(value, expected):
    assert play_true(value) is expected


def test_plain_data_is_plain_dicts_and_lists():
    assert plain({"a": (1, 2), "b": {"c": None}}) == {"a": [1, 2], "b": {"c": None}}
