# -*- coding: utf-8 -*-
"""``systemctl show`` read for units: the captures in
tests/fixtures/libvirt_service/debian12_systemctl_show.json (see its .source.txt)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.systemd import parse_systemctl_show, show_argv, units_by_id

from fakes.packages import SHOW  # pylint: disable=import-error


@pytest.mark.parametrize("capture, unit", [
    ("running", {"Id": "libvirtd.service", "LoadState": "loaded", "UnitFileState": "enabled", "ActiveState": "active"}),
    ("disabled", {"Id": "debug-shell.service", "LoadState": "loaded", "UnitFileState": "disabled", "ActiveState": "inactive"}),
    # a unit that does not exist is listed, with the words is-enabled (nothing) and is-active (inactive) print for it
    ("no_unit", {"Id": "libvirtd-not-installed.service", "LoadState": "not-found", "UnitFileState": "", "ActiveState": "inactive"}),
])
def test_one_unit_as_captured(capture, unit):
    reply = SHOW[capture]
    assert show_argv("systemctl", reply["argv"][4:]) == reply["argv"]
    assert parse_systemctl_show(reply["out"]) == [unit]


def test_nothing_where_systemd_is_not_running():
    assert SHOW["no_systemd"]["rc"] == 1
    assert parse_systemctl_show(SHOW["no_systemd"]["out"]) == []


def test_several_units_in_the_order_asked_and_by_name():
    text = "\n".join(SHOW[name]["out"] for name in ("disabled", "running", "no_unit"))
    units = parse_systemctl_show(text)
    assert [unit["Id"] for unit in units] == ["debug-shell.service", "libvirtd.service", "libvirtd-not-installed.service"]
    assert units_by_id(text)["libvirtd.service"]["UnitFileState"] == "enabled"
