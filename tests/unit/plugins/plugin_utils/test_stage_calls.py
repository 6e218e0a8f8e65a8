# -*- coding: utf-8 -*-
"""stage_calls: a stage role's inputs as the options of the stage's one call; for the tenants stage
the tenant_vms inputs as the options of tenant_domain with ``tenants``, which tenant_domain's own
argument spec accepts, the option types read from that spec."""

from __future__ import annotations

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import (
    TENANT_DOMAIN_ARGS, TENANT_STAGE_OPTIONS, TENANT_STAGE_SETTINGS)
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_module, stage_options
from fakes.stage_inputs import TENANT_VMS  # pylint: disable=import-error

INPUT = TENANT_VMS


def valid(options):
    spec = TENANT_DOMAIN_ARGS
    outcome = ArgumentSpecValidator(spec["argument_spec"], mutually_exclusive=spec["mutually_exclusive"],
                                    required_one_of=spec["required_one_of"], required_by=spec["required_by"]).validate(options)
    return outcome.error_messages


def test_the_inputs_become_the_options_of_one_call():
    options = stage_options("tenants", INPUT)
    assert options["tenants"] == INPUT["tenants"] and options["policy"] == {"numa": "strict"}
    assert options["machine"] == "q35" and options["live"] is True and "preview" not in options
    assert options["shutdown_timeout"] == 120 and options["vf_persist"] is True and options["gpu_ids"] == []
    assert not valid(options)
    assert stage_module("tenants") == "gpuvirt.tenancy.tenant_domain"


def test_the_gpu_pool_and_vf_pfs_go_into_the_policy_and_unset_options_are_left_out():
    options = stage_options("tenants", dict(INPUT, gpus=["0000:07:00.0"], vf_pfs=["0000:0c:00.0"], machine=None, policy=None,
                                            live=None, shutdown_timeout=None, firmware=""))
    assert options["policy"] == {"gpus": ["0000:07:00.0"], "vf_pfs": ["0000:0c:00.0"]}
    assert not {"machine", "live", "shutdown_timeout", "firmware"} & set(options)
    # an empty pool stays an empty pool (no GPU to tenants), unlike none (every GPU), which ansible-core 2.16
    # templates as "" (tenant_vms_gpus: "{{ gpuvirt_gpus | default(none) }}")
    assert stage_options("tenants", dict(INPUT, gpus=[]))["policy"]["gpus"] == []
    assert "gpus" not in stage_options("tenants", dict(INPUT, gpus=""))["policy"]
    assert "machine" not in stage_options("tenants", dict(INPUT, machine=""))
    # the stage's own options are always sent, an unset one empty
    unset = stage_options("tenants", dict(INPUT, tenants=None, priorities=None, vf_persist=None, nic_ids=None))
    assert unset["tenants"] == [] and unset["priorities"] == {} and unset["vf_persist"] is False and unset["nic_ids"] == []
    assert not valid(options)


def test_values_take_the_type_of_the_modules_option():
    options = stage_options("tenants", dict(INPUT, live="yes", force_off="false", shutdown_timeout="90"))
    assert options["live"] is True and options["force_off"] is False and options["shutdown_timeout"] == 90


def test_a_preview_sends_what_the_earlier_stages_leave():
    options = stage_options("tenants", dict(INPUT, preview=True))
    assert options["preview"] == {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}], "hugepages": [], "gpus": []}
    assert not valid(options)
    # what the preview does not say is the module's default for it
    assert stage_options("tenants", dict(INPUT, preview=True, preview_wanted=None))["preview"] == {
        "sriov_pfs": [], "hugepages": [], "gpus": []}


def test_every_option_of_the_stage_is_an_input():
    """The inputs are the stage's options of tenant_domain's spec (TENANT_STAGE_OPTIONS, every tenant's
    settings), plus the three that fold into policy and preview: none is missing, none unknown."""
    names = set(TENANT_STAGE_OPTIONS) | set(TENANT_STAGE_SETTINGS) | {"gpus", "vf_pfs", "preview_wanted"}
    assert sorted(INPUT) == sorted(names)


@pytest.mark.parametrize("stage, inputs, message", [
    ("tenants", [], "inputs: give the tenants stage's inputs as a dict"),
    ("tenants", dict((k, v) for k, v in INPUT.items() if k != "policy"), "missing: policy"),
    ("tenants", dict(INPUT, cpus=4), "not an input of the stage: cpus"),
    ("tenants", dict(INPUT, tenants={"a": {}}), r"tenants \(tenant_vms_tenants\) must be a list, got dict"),
    ("tenants", dict(INPUT, policy=["numa"]), r"policy \(tenant_vms_policy\) must be a dict"),
    ("tenants", dict(INPUT, live="maybe"), r"live \(tenant_vms_live\) must be a boolean, got 'maybe': give tenant_vms_live true or false"),
    ("tenants", dict(INPUT, shutdown_timeout="soon"), r"shutdown_timeout \(tenant_vms_shutdown_timeout\) must be an integer"),
    ("tenants", dict(INPUT, gpus="0000:07:00.0"), r"gpus \(tenant_vms_gpus\) must be a list"),
    ("boats", INPUT, "'boats' is not a host stage whose call is built here; give one of tenants"),
])
def test_bad_inputs_name_the_input_and_the_fix(stage, inputs, message):
    with pytest.raises(StageInputError, match=message):
        stage_options(stage, inputs)
