# -*- coding: utf-8 -*-
"""tenant_stage_options: the tenant_vms role's inputs as the options of the tenants stage's one
tenant_domain call (``tenants``), which tenant_domain's own argument spec accepts."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.filter.tenant_stage_options import INPUTS, tenant_stage_options
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import TENANT_DOMAIN_ARGS

INPUT = {"tenants": [{"name": "a", "vcpus": 1, "memory_mb": 64}], "policy": {"numa": "strict"}, "gpus": None, "vf_pfs": [],
         "domain_type": "kvm", "machine": "q35", "firmware": "efi", "memory_mode": "strict", "live": True,
         "priorities": {"online": {"cpu_shares": 1024}, "batch": {"cpu_shares": 256}}, "guest_access": {},
         "shutdown_timeout": 120, "force_off": False, "vf_persist": True, "gpu_ids": [], "nic_ids": [], "preview": False,
         "preview_wanted": {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}], "hugepages": [], "gpus": []}}


def valid(options):
    spec = TENANT_DOMAIN_ARGS
    outcome = ArgumentSpecValidator(spec["argument_spec"], mutually_exclusive=spec["mutually_exclusive"],
                                    required_one_of=spec["required_one_of"], required_by=spec["required_by"]).validate(options)
    return outcome.error_messages


def test_the_inputs_become_the_options_of_one_call():
    options = tenant_stage_options(INPUT)
    assert options["tenants"] == INPUT["tenants"] and options["policy"] == {"numa": "strict"}
    assert options["machine"] == "q35" and options["live"] is True and "preview" not in options
    assert not valid(options)


def test_the_gpu_pool_and_vf_pfs_go_into_the_policy_and_unset_options_are_left_out():
    options = tenant_stage_options(dict(INPUT, gpus=["0000:07:00.0"], vf_pfs=["0000:0c:00.0"], machine=None, policy=None))
    assert options["policy"] == {"gpus": ["0000:07:00.0"], "vf_pfs": ["0000:0c:00.0"]} and "machine" not in options
    # an empty pool stays an empty pool (no GPU to tenants), unlike none (every GPU)
    assert tenant_stage_options(dict(INPUT, gpus=[]))["policy"]["gpus"] == []
    assert not valid(options)


def test_a_preview_sends_what_the_earlier_stages_leave():
    options = tenant_stage_options(dict(INPUT, preview=True))
    assert options["preview"] == {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}], "hugepages": [], "gpus": []}
    assert not valid(options)


@pytest.mark.parametrize("inputs, message", [
    ([], "expected a dict of the tenant_vms inputs"),
    (dict((k, v) for k, v in INPUT.items() if k != "policy"), "inputs policy missing"),
    (dict(INPUT, tenants={"a": {}}), "tenants \\(tenant_vms_tenants\\) must be a list"),
])
def test_bad_inputs_name_the_input(inputs, message):
    with pytest.raises(AnsibleFilterError, match=message):
        tenant_stage_options(inputs)


def test_every_input_is_read():
    assert sorted(INPUT) == sorted(INPUTS)
