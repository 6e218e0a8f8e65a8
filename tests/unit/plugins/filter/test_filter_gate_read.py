# -*- coding: utf-8 -*-
"""A later stage takes what the gate read only while no earlier stage changed the host (gate_read)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.gate_read import gate_read

CHECKS = {"boot": {"changed": False}, "sriov_vfio": {"changed": False, "options": {"gpus": []}}, "tenants": {"changed": True}}


@pytest.mark.parametrize("read, key, changed, expected", [
    (CHECKS, "sriov_vfio", [False], CHECKS["sriov_vfio"]),
    (CHECKS, "sriov_vfio", [], CHECKS["sriov_vfio"]),
    # the boot stage changed the host (a reboot, hugepages): the check is out of date
    (CHECKS, "sriov_vfio", [True], {}),
    # flags as Jinja hands them over, text included; an unset flag is not a change
    (CHECKS, "tenants", ["False", "false", None, ""], CHECKS["tenants"]),
    (CHECKS, "tenants", [False, "True"], {}),
    (CHECKS, "nothing", [False], {}),
    ({"domains": {"a": {}}}, None, [False], {"domains": {"a": {}}}),
    (None, "tenants", [False], {}),
])
def test_the_gates_read_stands_while_nothing_changed(read, key, changed, expected):
    assert gate_read(read, key, changed) == expected


@pytest.mark.parametrize("args, words", [
    (([1], "tenants", []), "expected what the preflight gate read"),
    ((CHECKS, "tenants", True), "changed is a list"),
    ((CHECKS, "tenants", ["maybe"]), "changed: "),
])
def test_bad_inputs_are_named(args, words):
    with pytest.raises(AnsibleFilterError, match=words):
        gate_read(*args)
