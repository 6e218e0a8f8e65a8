# -*- coding: utf-8 -*-
"""The planner's request (placement/planner_request.py): the policy over its defaults (the tenants' MACs,
each one interface's, are the tenant record's list rule: tenancy/test_record.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner_request import (
    POLICY_DEFAULTS, hugepage_size_name, read_policy)


def test_read_policy_defaults_and_choices():
    assert read_policy(None) == dict(POLICY_DEFAULTS)
    policy = read_policy({"pcie_affinity_level": "pix", "numa": None, "gpus": None, "hugepage_size": "1G"})
    assert policy["pcie_affinity_level"] == "PIX"
    assert policy["numa"] == "required"  # None: the default
    assert policy["hugepage_size"] == "1G"


@pytest.mark.parametrize("policy, message", [
    ({"nmua": "required"}, "policy: unknown key.s. nmua"),
    ({"numa": "sometimes"}, "policy.numa: 'sometimes' is not one of required, required_vf_socket, preferred"),
    ({"pcie_affinity_level": "far"}, "policy.pcie_affinity_level: 'FAR' is not one of"),
    ({"hugepage_size": "3M"}, "policy.hugepage_size"),
])
def test_read_policy_rejects(policy, message):
    with pytest.raises(InputError, match=message):
        read_policy(policy)


def test_hugepage_size_name():
    assert hugepage_size_name("2048kB") == "2M"
    assert hugepage_size_name("none") is None


@pytest.mark.parametrize("extra", [{}, {"guest": {"address": "10.0.0.5/24", "packages": ["vim"]}}, {"gpus": ["0000:07:00.0"]}])
def test_a_record_read_plain_is_a_copy_of_plain_data(extra):
    # the planner reads each record once as a plain dict (a copy as it is where every value is plain,
    # thawed where some is a dict or a list): the same fields either way, and changing it changes no record
    raw = dict({"name": "t1", "vcpus": 4, "memory_mb": 8192, "vfs": 1, "numa": None}, **extra)
    record = tenant_records([raw])[0]
    plain = record.plain()
    assert plain == dict(record) == dict((key, record[key]) for key in record)
    assert "numa" not in plain  # a field without a value is left out
    assert all(type(value) in (str, int, bool, float, dict, list) for value in plain.values())
    plain["vcpus"] = 99
    for value in plain.values():
        if isinstance(value, dict):
            value["address"] = "10.0.0.9"
        if isinstance(value, list):
            value.append("x")
    again = record.plain()
    assert again["vcpus"] == 4 and again == dict(record)
    assert again.get("guest", {}).get("address") in (None, "10.0.0.5/24")
