# -*- coding: utf-8 -*-
"""The placement filters: plan_tenants (the planner behind a Jinja filter, bad input as a filter
error), and tenant_domains / tenant_removals (a plan as tenant_domain arguments, built once per
tenant)."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.placement import FilterModule

from placement_topologies import LAB_EDU, LAB_VFS, lab  # pylint: disable=import-error

FILTERS = FilterModule().filters()
PLAN = FILTERS["plan_tenants"]
DOMAINS = FILTERS["tenant_domains"]
REMOVALS = FILTERS["tenant_removals"]
PRIORITIES = {"online": {"cpu_shares": 1024},
              "batch": {"cpu_shares": 256, "cpu_period": 100000, "cpu_quota": 50000, "iotune": {"total_iops_sec": 200}}}
SETTINGS = {"domain_type": "kvm", "machine": None, "memory_mode": "strict", "priorities": PRIORITIES}


def test_filter_plans():
    plan = PLAN(lab(pages_2m=(0, 64)), [{"name": "a", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64}], {"reserved_cpus": "0"})
    assert plan["placements"]["a"]["gpus"] == [LAB_EDU]
    assert plan["placements"]["a"]["numa_node"] == 1


def test_filter_policy_defaults():
    plan = PLAN(lab(pages_2m=(0, 64)), [{"name": "a", "vcpus": 1, "memory_mb": 64}])
    assert plan["placements"]["a"]["numa_node"] == 1


@pytest.mark.parametrize("tenants, policy, message", [
    ([{"name": "a", "vcpus": 1, "memory_mb": 64}], {"numa": "maybe"}, "gpuvirt.tenancy.plan_tenants: policy.numa"),
    ([{"name": "a", "memory_mb": 64}], {}, "vcpus is required"),
])
def test_filter_errors(tenants, policy, message):
    with pytest.raises(AnsibleFilterError, match=message):
        PLAN(lab(), tenants, policy)


TENANTS = [{"name": "a", "gpus": [LAB_EDU], "vfs": 1, "vcpus": 1, "max_vcpus": 2, "memory_mb": 64, "hugepage_size": "2M",
            "state": "running", "mac": "52:54:00:00:00:0a", "vlan": 100},
           {"name": "b", "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "emulator": "housekeeping",
            "priority": "batch", "domain_type": "qemu", "qos": {"iotune": {"total_iops_sec": 500}},
            "disks": [{"path": "/var/lib/libvirt/images/b.raw", "format": "raw"}]}]


def test_tenant_domains_are_the_module_arguments_of_each_placed_tenant():
    plan = PLAN(lab(pages_2m=(0, 64)), TENANTS, {"reserved_cpus": [0], "numa": "preferred"})
    args = DOMAINS(plan, TENANTS, SETTINGS)
    assert [a["name"] for a in args] == list(plan["placements"]) == ["a", "b"]
    a, b = args
    placed = plan["placements"]["a"]
    assert a == {"name": "a", "state": "running", "domain_type": "kvm", "vcpus": 1, "max_vcpus": 2, "memory_mb": 64,
                 "hugepage_size": "2M", "gpus": [LAB_EDU], "vfs": placed["vfs"], "network_vfs": placed["network_vfs"],
                 "disks": [], "qos": {"cpu_shares": 1024}, "vcpu_pins": placed["vcpu_pins"],
                 "emulator_cpus": ",".join(str(c) for c in placed["emulator_cpus"]), "memory_mode": "strict",
                 "nodeset": str(placed["numa_node"]), "mac": "52:54:00:00:00:0a", "vlan": 100, "firmware": "efi"}
    assert a["vfs"][0] in LAB_VFS and a["nodeset"] == "1"
    # the tenant's own domain type and qos win; its class's QoS is merged under its own, key by key
    assert (b["state"], b["domain_type"], b["hugepage_size"]) == ("defined", "qemu", "none")
    assert b["qos"] == {"cpu_shares": 256, "cpu_period": 100000, "cpu_quota": 50000, "iotune": {"total_iops_sec": 500}}
    assert b["disks"] == TENANTS[1]["disks"]
    assert "mac" not in b and "vlan" not in b and "machine" not in b
    assert DOMAINS(plan, TENANTS, dict(SETTINGS, machine="q35"))[0]["machine"] == "q35"


def test_tenant_domains_need_each_priority_class():
    plan = PLAN(lab(pages_2m=(0, 64)), TENANTS, {"reserved_cpus": [0], "numa": "preferred"})
    with pytest.raises(AnsibleFilterError, match="tenant b has priority batch, which the priorities \\(online\\) do not define"):
        DOMAINS(plan, TENANTS, dict(SETTINGS, priorities={"online": {}}))


def test_tenant_removals_take_the_tenants_own_timeout():
    plan = {"placements": {}, "released": {"a": {}, "c": {}}}
    tenants = [{"name": "a", "state": "absent", "shutdown_timeout": 5, "force_off": True}]
    assert REMOVALS(plan, tenants, {"shutdown_timeout": 120, "force_off": False}) == [
        {"name": "a", "state": "absent", "shutdown_timeout": 5, "force_off": True},
        {"name": "c", "state": "absent", "shutdown_timeout": 120, "force_off": False}]
