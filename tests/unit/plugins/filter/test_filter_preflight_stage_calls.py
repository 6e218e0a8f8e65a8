# -*- coding: utf-8 -*-
"""The stage call filter as site.yml calls it: the calls the gate checks."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.preflight_stage_calls import FilterModule

FILTERS = FilterModule().filters()
OPTIONS = {"devices": ["0000:82:00.0"], "vfs_of": ["0000:81:00.0"], "persist": True}

# --------------------------------------------------------------------------- the calls the gate checks
CALLS = {"boot": {"kernel_args": []}, "sriov_vfio": {}, "tenants": {"tenants": []}}


def test_the_gate_checks_each_stage_that_has_a_call():
    # the SR-IOV/VFIO stage asks nothing of this inventory: no check of it
    assert FILTERS["preflight_stage_calls"](CALLS) == {"boot": {"kernel_args": []}, "tenants": {"tenants": []}}
    assert FILTERS["preflight_stage_calls"](dict(CALLS, sriov_vfio=OPTIONS)) == dict(CALLS, sriov_vfio=OPTIONS)


def test_the_calls_must_be_a_dict():
    with pytest.raises(AnsibleFilterError, match="expected a dict stage -> the options of its call, got list"):
        FILTERS["preflight_stage_calls"]([OPTIONS])
