# -*- coding: utf-8 -*-
"""The stage check filter as the host stage roles call it: the gate's check is taken only when it
checked exactly these options, ran without error and changes nothing."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.stage_check_result import FilterModule

FILTERS = FilterModule().filters()
OPTIONS = {"devices": ["0000:82:00.0"], "vfs_of": ["0000:81:00.0"], "persist": True}
RESULT = {"changed": False, "devices": []}


def check(**kwargs):
    return dict({"module": "vfio_bind", "options": OPTIONS, "changed": False, "result": RESULT, "error": None}, **kwargs)


def test_check_result_answers_only_its_options():
    assert FILTERS["stage_check_result"](check(), OPTIONS) == RESULT
    assert FILTERS["stage_check_result"](check(), dict(OPTIONS, persist=False)) == {}
    assert FILTERS["stage_check_result"](check(), dict((k, v) for k, v in OPTIONS.items() if k != "persist")) == {}
    assert FILTERS["stage_check_result"](None, OPTIONS) == {}
    assert FILTERS["stage_check_result"]({}, OPTIONS) == {}


@pytest.mark.parametrize("override", [{"changed": True}, {"changed": None}, {"error": "InputError: x"}])
def test_a_check_that_changes_or_failed_answers_nothing(override):
    assert FILTERS["stage_check_result"](check(**override), OPTIONS) == {}


@pytest.mark.parametrize("args, message", [
    (("x", {}), "gpuvirt.tenancy.stage_check_result: expected one stage of preflight_info's stage_checks"),
    (({}, None), "gpuvirt.tenancy.stage_check_result: expected the dict of the stage call's options, got NoneType"),
])
def test_bad_inputs_are_named(args, message):
    with pytest.raises(AnsibleFilterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FILTERS["stage_check_result"](*args)


# --------------------------------------------------------------------------- the calls the gate checks
CALLS = {"boot": {"kernel_args": []}, "sriov_vfio": {}, "tenants": {"tenants": []}}


def test_the_gate_checks_each_stage_that_has_a_call():
    # the SR-IOV/VFIO stage asks nothing of this inventory: no check of it
    assert FILTERS["preflight_stage_calls"](CALLS) == {"boot": {"kernel_args": []}, "tenants": {"tenants": []}}
    assert FILTERS["preflight_stage_calls"](dict(CALLS, sriov_vfio=OPTIONS), False) == dict(CALLS, sriov_vfio=OPTIONS)


def test_a_preview_checks_no_stage():
    assert FILTERS["preflight_stage_calls"](dict(CALLS, sriov_vfio=OPTIONS), True) == {}


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
