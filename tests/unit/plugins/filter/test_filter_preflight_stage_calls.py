# -*- coding: utf-8 -*-
"""The stage call filters as site.yml calls them: the calls the gate checks, and the SR-IOV/VFIO
stage's call only when the inventory asks something of it."""

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


@pytest.mark.parametrize("options, asks", [
    ({"sriov_pfs": [{"pf": "0000:81:00.0", "num_vfs": 4}], "gpus": [], "devices": [], "persist": True}, True),
    ({"sriov_pfs": [], "gpus": ["0000:82:00.0"], "devices": []}, True),
    ({"sriov_pfs": [], "gpus": [], "devices": ["0000:83:00.0"]}, True),
    ({"sriov_pfs": [], "gpus": [], "devices": [], "tenants": [{"name": "a"}], "persist": True}, False),
])
def test_the_vfio_stage_calls_only_when_the_inventory_names_a_pf_gpu_or_device(options, asks):
    assert FILTERS["vfio_stage_call"](options) == (options if asks else {})


def test_the_vfio_stage_options_must_be_a_dict():
    with pytest.raises(AnsibleFilterError, match="vfio_stage_call: expected the dict of vfio_bind's options, got NoneType"):
        FILTERS["vfio_stage_call"](None)
