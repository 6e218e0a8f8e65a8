# -*- coding: utf-8 -*-
"""The planner's request (placement/planner_request.py): the policy over its defaults (the tenants' MACs,
each one interface's, are the tenant record's list rule: tenancy/test_record.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
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
