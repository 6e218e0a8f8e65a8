# -*- coding: utf-8 -*-
"""The placement filters: plan_tenants (the planner behind a Jinja filter, bad input as a filter
error), and the plan as tenant_domain arguments (module_utils tenant_plan: tenant_domains /
tenant_removals, built once per tenant, the entries of its ``domains``), which tenant_domain's
``tenants`` builds on the host from the same plan."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.plan_tenants import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_pinning import PinRequest, apply_pinning
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import read_assignment
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_tree import parse_xml, to_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_call import domain_options, planned_options
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import TenantSpec
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.libvirt_service import service_query

from placement_topologies import LAB_EDU, LAB_VFS, dgx_a100, grouped, lab, synthetic  # pylint: disable=import-error

FILTERS = FilterModule().filters()
PLAN = FILTERS["plan_tenants"]
# the plan as tenant_domain entries: shared by the plan_tenants filter and tenant_domain's tenants (module_utils tenant_plan)
DOMAINS = tenant_plan.tenant_domains
REMOVALS = tenant_plan.tenant_removals
GROUP_DEVICES = FILTERS["tenant_group_devices"]
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
    ([{"name": "a", "memory_mb": 64}], {}, "vcpus: required"),
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


def test_tenant_domains_are_the_entries_of_one_tenant_domain_call():
    """With ``live`` in the settings and a tenant's own ``autostart``, each entry carries them, and
    the list is what the module's ``domains`` takes (checked as the module checks it)."""
    tenants = [dict(TENANTS[0], autostart=False), TENANTS[1]]
    plan = PLAN(lab(pages_2m=(0, 64)), tenants, {"reserved_cpus": [0], "numa": "preferred"})
    entries = DOMAINS(plan, tenants, dict(SETTINGS, live=True))
    assert [(e["live"], e.get("autostart")) for e in entries] == [(True, False), (True, None)]
    checked = domain_options(entries)
    assert [(options["name"], options["state"], options["autostart"], label) for options, label in checked] == [
        ("a", "running", False, "domains[0] (a)"), ("b", "defined", None, "domains[1] (b)")]
    assert "live" not in DOMAINS(plan, tenants, SETTINGS)[0]


GUEST_TENANTS = [dict(TENANTS[0], autostart=False, image={"base": "/srv/debian-12.qcow2", "size_gb": 8},
                      guest={"address": "192.168.150.11/24", "rdma_address": "10.20.0.11/24", "packages": ["numactl"],
                             "management_mac": "52:54:00:00:01:0A"}),
                 dict(TENANTS[1], data_nic={"network": "gpuvirt-data", "mac": "02:00:00:AA:BB:CC", "vlan": 7})]
GUEST_ACCESS = {"user": "ops", "guest_dir": "/srv/guests",
                "management": {"network": "gpuvirt-mgmt", "gateway": "192.168.150.1", "dns": ["192.168.150.1"]}}


def planned_entries(tenants):
    records = tenant_records(tenants)
    plan = PLAN(lab(pages_2m=(0, 64)), records, {"reserved_cpus": [0], "numa": "preferred"})
    return tenant_plan.guest_domains(DOMAINS(plan, records, dict(SETTINGS, live=True)), records, GUEST_ACCESS)


def test_the_tenants_stage_entries_are_the_module_options_without_a_second_check():
    """planned_options (the tenants stage's path) gives what domain_options (a user's ``domains``) gives
    for the entries the plan makes from the records, with only what they pass on validated again."""
    entries = planned_entries(GUEST_TENANTS)
    assert entries[0]["management"]["mac"] == "52:54:00:00:01:0a" and entries[1]["data_nic"]["mac"] == "02:00:00:aa:bb:cc"
    assert planned_options(entries) == domain_options(entries)
    assert [spec.interfaces for spec in (TenantSpec(options, planned=True) for options, _label in planned_options(entries))] == [
        TenantSpec(options).interfaces for options, _label in domain_options(entries)]


@pytest.mark.parametrize("passed_on, words", [
    ({"qos": {"cpu_shares": "many"}}, "cpu_shares"),
    ({"disks": [{"format": "raw"}]}, "path"),
    ({"image": {"base": "/srv/debian-12.qcow2", "size_gb": "big"}}, "size_gb"),
    ({"autostart": "perhaps"}, "autostart"),
    ({"force_off": "sometimes"}, "force_off"),
])
def test_what_a_planned_entry_passes_on_as_the_user_gave_it_is_validated_as_domains_validates_it(passed_on, words):
    entries = planned_entries(GUEST_TENANTS)
    entries[1] = dict(entries[1], **passed_on)
    with pytest.raises(InputError) as planned:
        planned_options(entries)
    with pytest.raises(InputError) as given:
        domain_options(entries)
    assert str(planned.value) == str(given.value) and str(planned.value).startswith("domains[1] (b): ") and words in str(planned.value)


def test_tenant_domains_need_each_priority_class():
    plan = PLAN(lab(pages_2m=(0, 64)), TENANTS, {"reserved_cpus": [0], "numa": "preferred"})
    with pytest.raises(InputError, match="tenant b has priority batch, which the priorities \\(online\\) do not define"):
        DOMAINS(plan, TENANTS, dict(SETTINGS, priorities={"online": {}}))


def test_tenant_removals_take_the_tenants_own_timeout():
    plan = {"placements": {}, "released": {"a": {}, "c": {}}}
    tenants = [{"name": "a", "state": "absent", "shutdown_timeout": 5, "force_off": True}]
    assert REMOVALS(plan, tenants, {"shutdown_timeout": 120, "force_off": False}) == [
        {"name": "a", "state": "absent", "shutdown_timeout": 5, "force_off": True},
        {"name": "c", "state": "absent", "shutdown_timeout": 120, "force_off": False}]


# --------------------------------------------------------------------------- domains that are not tenants
# On the DGX A100-class model: node 1 has GPUs 0000:30:00.0 and 0000:40:00.0, CPUs 16-31 (and
# their SMT siblings 144-159), the NIC 0000:38:00.0 with VFs 0000:38:00.1-4.
def dgx():
    return dgx_a100()


LEGACY = {"hostdevs": ["0000:30:00.0", "0000:38:00.1"], "cpus": "16-17", "numa_node": 1,
          "hugepages": {"size": "1G", "node": 1, "count": 60}, "memory_mb": 61440, "active": True}


def held(plan):
    """Every GPU, VF and CPU the plan gives."""
    out = set()
    for placement in plan["placements"].values():
        out.update(placement["gpus"] + placement["vfs"] + placement["cpus"])
    return out


@pytest.mark.parametrize("foreign, policy, never_given, report, placed", [
    # its GPU, its VF (an interface hostdev), its CPUs and their SMT siblings (whole cores)
    ({"legacy": LEGACY}, {}, ["0000:30:00.0", "0000:38:00.1", 16, 17, 144, 145],
     {"gpus": ["0000:30:00.0"], "vfs": ["0000:38:00.1"], "cpus": "16-17,144-145",
      "hugepages": {"size": "1G", "count": 60, "nodes": [1]}, "notes": []}, 7),
    # smt threads: only its own CPUs
    ({"legacy": LEGACY}, {"smt": "threads"}, ["0000:30:00.0", 16, 17], {"cpus": "16-17"}, 7),
    # a reserved CPU it shares (its emulator on the host's CPUs) stays reserved, not an error
    ({"legacy": dict(LEGACY, cpus="0,16")}, {"reserved_cpus": [0, 128]}, [0, 16, 144], {"cpus": "16,144"}, 7),
    # no pins, no NUMA node: its hugepages leave every node's pool, and the report says why
    ({"legacy": dict(LEGACY, cpus="", numa_node=None)}, {}, ["0000:30:00.0"],
     {"cpus": "", "hugepages": {"size": "1G", "count": 60, "nodes": [0, 1, 2, 3, 4, 5, 6, 7]},
      "notes": ["no CPU pins: its vCPUs may run on any host CPU; pin it (or list it as a tenant) to keep them apart",
                "hugepages without a NUMA node: kept out of every node's pool"]},
     # 4 x 1G pages left on each GPU node: one tenant each
     4),
])
def test_foreign_domains_keep_what_they_hold(foreign, policy, never_given, report, placed):
    topology = dgx()
    tenants = [{"name": "t%d" % i, "gpus": 1, "vfs": 1, "vcpus": 8, "memory_mb": 4096, "hugepage_size": "1G"} for i in range(8)]
    plan = PLAN(topology, tenants, policy, foreign)
    assert not set(never_given) & held(plan)
    for key, value in report.items():
        assert plan["foreign"]["legacy"][key] == value, key
    # seven GPUs are left for eight tenants (fewer when the pages are short)
    assert len(plan["placements"]) == placed and len(plan["unplaced"]) == 8 - placed
    assert "legacy" not in plan["released"] and "legacy" not in plan["placements"]


def test_foreign_hugepages_leave_their_node_pool():
    topology = dgx()
    # node 1 has 64 x 1G pages; the foreign domain holds 60 of them
    tenants = [{"name": "big", "gpus": ["0000:40:00.0"], "vcpus": 4, "memory_mb": 8192, "hugepage_size": "1G"}]
    assert PLAN(topology, tenants, {})["placements"]["big"]["numa_node"] == 1
    plan = PLAN(topology, tenants, {}, {"legacy": LEGACY})
    assert "hugepages 1G short on node 1: 4 free of 4, 8 needed" in plan["unplaced"]["big"]
    assert plan["free"]["1"]["hugepages"]["1G"] == 4


def test_foreign_domain_with_cells_takes_each_cells_pages_from_its_node():
    """A domain that is not a tenant, with two guest cells bound to nodes 1 and 3 (30 x 1G each):
    each node's pool loses its cell's pages, no other node's (a domain without cells and without a
    node takes its count out of every pool)."""
    topology = dgx()
    cells = [{"id": 0, "node": 1, "vcpus": [0], "memory_kib": 30 << 20}, {"id": 1, "node": 3, "vcpus": [1], "memory_kib": 30 << 20}]
    legacy = dict(LEGACY, numa_node=None, hugepages={"size": "1G", "node": None, "count": 60}, cells=cells)
    plan = PLAN(topology, [], {}, {"legacy": legacy})
    assert [plan["free"][node]["hugepages"]["1G"] for node in ("1", "3", "5")] == [34, 34, 64]
    assert plan["foreign"]["legacy"]["hugepages"]["nodes"] == [1, 3]


def test_foreign_plain_memory_leaves_its_node():
    topology = dgx()
    legacy = dict(LEGACY, hugepages=None, memory_mb=120000, hostdevs=[], cpus="")
    tenants = [{"name": "plain", "vcpus": 2, "memory_mb": 16384, "hugepage_size": "none", "gpus": ["0000:40:00.0"]}]
    assert "plain" in PLAN(topology, tenants, {})["placements"]
    assert "plain" in PLAN(topology, tenants, {}, {"legacy": legacy})["unplaced"]


def test_a_tenant_naming_a_foreign_gpu_is_refused_with_its_holder():
    plan = PLAN(dgx(), [{"name": "t", "gpus": ["0000:30:00.0"], "vcpus": 2, "memory_mb": 1024}], {}, {"legacy": LEGACY})
    assert plan["unplaced"]["t"].startswith("GPUs 0000:30:00.0 are held by libvirt domain(s) legacy")


def test_every_vf_of_a_pf_held_leaves_the_pf_out():
    legacy = dict(LEGACY, hostdevs=["0000:38:00.%d" % i for i in range(1, 5)], cpus="")
    plan = PLAN(dgx(), [{"name": "t", "vfs": 1, "vcpus": 2, "memory_mb": 1024}], {"vf_pfs": ["0000:38:00.0", "0000:48:00.0"]},
                {"legacy": legacy})
    assert plan["placements"]["t"]["vfs"][0].startswith("0000:48:00.")


def test_no_foreign_domain_is_the_plain_plan_and_inputs_stay_as_they_were():
    import copy  # pylint: disable=import-outside-toplevel
    topology, tenants, policy = dgx(), [{"name": "t", "gpus": 2, "vcpus": 4, "memory_mb": 4096}], {"reserved_cpus": [0]}
    kept = copy.deepcopy((topology, tenants, policy))
    plain = PLAN(topology, tenants, policy)
    assert PLAN(topology, tenants, policy, {}) == plain and plain["foreign"] == {}
    PLAN(topology, tenants, policy, {"legacy": LEGACY})
    assert (topology, tenants, policy) == kept


def test_tenant_domains_with_the_host_model_give_each_network_vf_its_mac():
    topology = dgx()
    for pf in ("0000:38:00.0", "0000:48:00.0"):
        topology["pci_devices"][pf]["netdevs"] = ["ens%s" % pf[5:7]]
    tenants = [{"name": "t", "gpus": 1, "vfs": 2, "vcpus": 4, "memory_mb": 4096, "vlan": 300}]
    plan = PLAN(topology, tenants, {})
    placed = plan["placements"]["t"]
    args = DOMAINS(plan, tenants, dict(SETTINGS, topology=topology, firmware="bios"))[0]
    vfs = sorted(placed["vfs"])
    assert args["network_vfs"] == [{"address": vfs[0], "mac": derived_mac("t", 0), "vlan": 300},
                                   {"address": vfs[1], "mac": derived_mac("t", 1), "vlan": 300}]
    assert args["firmware"] == "bios" and "mac" not in args
    # a tenant's own firmware and machine win
    own = [dict(tenants[0], firmware="efi", machine="pc-q35-7.2")]
    assert (DOMAINS(plan, own, dict(SETTINGS, firmware="bios"))[0]["firmware"],
            DOMAINS(plan, own, SETTINGS)[0]["machine"]) == ("efi", "pc-q35-7.2")
    with pytest.raises(InputError, match=r"tenants\[0\] \(t\): firmware: 'coreboot' is not one of efi, bios"):
        DOMAINS(plan, [dict(tenants[0], firmware="coreboot")], SETTINGS)


NEEDS = FILTERS["tenant_host_needs"]
ONE_G = {"uefi": True, "hugetlbfs_mounts": [{"size": "1G", "path": "/dev/hugepages1G"}]}


def sized(**fields):
    return dict({"vcpus": 2, "memory_mb": 2048}, **fields)


@pytest.mark.parametrize("tenants, policy, firmware, expected", [
    ([sized(name="a", hugepage_size="1G")], {}, "efi", ONE_G),
    ([sized(name="a")], {"hugepage_size": "1G"}, "efi", ONE_G),
    ([sized(name="a", hugepage_size="1G")], {"hugepage_size": "3G"}, "efi", ONE_G),  # the policy's size unused
    ([sized(name="a")], {}, "bios", {"uefi": False, "hugetlbfs_mounts": []}),
    ([sized(name="a", firmware="efi"), sized(name="b", hugepage_size="none")], {}, "bios", {"uefi": True, "hugetlbfs_mounts": []}),
    ([{"name": "a", "state": "absent", "hugepage_size": "1G"}], {}, "efi", {"uefi": False, "hugetlbfs_mounts": []}),
    ([], {}, "efi", {"uefi": False, "hugetlbfs_mounts": []}),
    # an entry its tenant record refuses needs nothing: the gate's report names it, the tenants stage refuses it
    ([sized(name="a", hugepage_size="3G")], {}, "efi", {"uefi": False, "hugetlbfs_mounts": []}),
    ([{"name": "a", "hugepage_size": "1G"}], {}, "efi", {"uefi": False, "hugetlbfs_mounts": []}),  # no size
    ([sized(name="a", firmware="coreboot"), sized(name="b", firmware="bios", hugepage_size="1G")], {}, "efi",
     {"uefi": False, "hugetlbfs_mounts": [{"size": "1G", "path": "/dev/hugepages1G"}]}),
    (["a", sized(name="b")], {}, "efi", {"uefi": True, "hugetlbfs_mounts": []}),
])
def test_tenant_host_needs(tenants, policy, firmware, expected):
    assert NEEDS(tenants, policy, firmware) == expected


def test_tenant_host_needs_errors():
    with pytest.raises(AnsibleFilterError, match="expected the tenant list"):
        NEEDS({"name": "a"})
    with pytest.raises(AnsibleFilterError, match=r"policy.hugepage_size \(gpuvirt_tenant_policy\): '3G'"):
        NEEDS([sized(name="a")], {"hugepage_size": "3G"})


GATE_QUERY = FILTERS["libvirt_gate_query"]
URI = "qemu:///system"


@pytest.mark.parametrize("tenants, args, service", [
    # OVMF decided from the tenants: one boots UEFI (the default firmware)
    ([sized(name="a"), sized(name="b", firmware="bios")], (False, "libvirtd", None, None, {}, "efi"), {"name": "libvirtd", "uefi": True}),
    ([sized(name="a")], (False, "libvirtd", None, None, {}, "bios"), {"name": "libvirtd", "uefi": False}),
    # libvirt_host_uefi given wins; packages given go with the question
    ([{"name": "a"}], (False, "virtqemud", False, ["libvirt-daemon-system"], {}, "efi"),
     {"name": "virtqemud", "uefi": False, "packages": ["libvirt-daemon-system"]}),
    # a preview asks no service question (no host to ask)
    ([{"name": "a"}], (True, "libvirtd", None, None, {}, "efi"), None),
    ([], (), {"name": "libvirtd", "uefi": False}),
])
def test_libvirt_gate_query_asks_what_libvirt_host_asks(tenants, args, service):
    query = GATE_QUERY(tenants, URI, *args)
    expected = {"names": [t["name"] for t in tenants], "foreign": True, "uri": URI}
    if service is not None:
        expected["service"] = service
        # the same question libvirt_host asks (the action libvirt_service, plugin_utils libvirt_service)
        assert service == service_query(service["name"], service["uefi"], service.get("packages"))
    assert query == expected


def test_libvirt_gate_query_errors():
    with pytest.raises(AnsibleFilterError, match="libvirt_gate_query: expected the tenant list"):
        GATE_QUERY({"name": "a"}, URI)
    with pytest.raises(AnsibleFilterError, match=r"policy.hugepage_size \(gpuvirt_tenant_policy\): '3G'"):
        GATE_QUERY([sized(name="a")], URI, False, "libvirtd", None, None, {"hugepage_size": "3G"})
    # a tenant its record refuses is asked about (the gate's report names it), and needs no OVMF
    query = GATE_QUERY([sized(name="a", hugepage_size="3G")], URI)
    assert query["names"] == ["a"] and query["service"]["uefi"] is False


# --------------------------------------------------------------------------- IOMMU groups
GPU, AUDIO, OTHER_GPU = "0000:10:00.0", "0000:10:00.1", "0000:11:00.0"


def audio_host():
    """One node, two GPUs; the first shares IOMMU group 7 with its audio function."""
    return grouped(synthetic(1, [8], 2, [2], [0], [256]), {7: [GPU, AUDIO]},
                   {AUDIO: {"class": "0x040300", "numa_node": 0, "driver": "snd_hda_intel"}})


def test_a_gpus_audio_function_is_a_hostdev_of_its_domain_and_bound_to_vfio():
    tenants = [{"name": "a", "gpus": [GPU], "vcpus": 2, "memory_mb": 64}, {"name": "b", "gpus": 1, "vcpus": 2, "memory_mb": 64}]
    plan = PLAN(audio_host(), tenants)
    args = dict((a["name"], a) for a in DOMAINS(plan, tenants, SETTINGS))
    assert args["a"]["gpus"] == [GPU, AUDIO]
    assert args["b"]["gpus"] == [OTHER_GPU]
    assert GROUP_DEVICES(audio_host()) == {"companions": [AUDIO], "left_out": {}, "shared": {}}
    # only the pool's GPUs take their functions along
    assert GROUP_DEVICES(audio_host(), {"gpus": [OTHER_GPU]})["companions"] == []


def test_a_function_a_foreign_domain_holds_leaves_the_gpu_of_its_group_out():
    tenants = [{"name": "a", "gpus": 1, "vcpus": 2, "memory_mb": 64}, {"name": "b", "gpus": 1, "vcpus": 2, "memory_mb": 64}]
    plan = PLAN(audio_host(), tenants, {}, {"legacy": {"hostdevs": [AUDIO], "cpus": "", "active": True}})
    assert [p["gpus"] for p in plan["placements"].values()] == [[OTHER_GPU]]
    assert "0000:10:00.1 (held by libvirt domain legacy, which gpuvirt_tenants does not list)" in plan["groups"]["left_out"][GPU]
    assert "left out for their IOMMU groups: 0000:10:00.0" in plan["unplaced"]["b"]


@pytest.mark.parametrize("policy, message", [
    ({"host_devices": "0000:10:00.1"}, "policy.host_devices: expected a list"),
    ({"host_devices": ["sound"]}, "policy.host_devices: 'sound' is not a PCI address"),
])
def test_group_filter_errors(policy, message):
    with pytest.raises(AnsibleFilterError, match="gpuvirt.tenancy.tenant_group_devices: " + message):
        GROUP_DEVICES(audio_host(), policy)


def test_spanning_tenant_domain_has_its_cells_and_validates(tmp_path):
    """A 4-GPU tenant on the DGX A100-class host (NPS4: 2 GPUs a node) under numa: spread: its
    tenant_domain entry, checked as the module checks it, builds a definition with one guest cell
    per host node (vCPUs, memory, memnode strict on the node, hugepages in both cells, vCPUs pinned
    on the cell's node) and each GPU and VF under a root port of its cell's pcie-expander-bus, those
    that share a switch on the host under one emulated switch on it (pcie_switches); libvirt's
    schema (virt-xml-validate) accepts it, and bringing it to the same entry again changes nothing."""
    topology = dgx_a100()
    tenants = [{"name": "wide", "vcpus": 32, "memory_mb": 131072, "gpus": 4, "vfs": 2, "hugepage_size": "1G", "numa": "spread"}]
    plan = PLAN(topology, tenants)
    placed = plan["placements"]["wide"]
    entries = DOMAINS(plan, tenants, dict(SETTINGS, machine="q35", topology=topology))
    (options, _label), = domain_options(entries)
    assert options["nodeset"] == ",".join(map(str, placed["numa_nodes"]))
    spec = TenantSpec(options)
    root = spec.build()
    cpu_node = dict((c["id"], c["numa_node"]) for c in topology["cpus"])
    cells = root.findall("cpu/numa/cell")
    assert [(c.get("id"), c.get("cpus"), c.get("memory"), c.get("unit")) for c in cells] == [
        ("0", "0-15", str(64 << 20), "KiB"), ("1", "16-31", str(64 << 20), "KiB")]
    assert [(m.get("cellid"), m.get("mode"), m.get("nodeset")) for m in root.findall("numatune/memnode")] == [
        ("0", "strict", str(placed["numa_nodes"][0])), ("1", "strict", str(placed["numa_nodes"][1]))]
    assert root.find("memoryBacking/hugepages/page").get("nodeset") == "0-1"
    # pins, as tenant_domain writes them with the definition
    apply_pinning(root, PinRequest(options["vcpu_pins"], options["emulator_cpus"], options["memory_mode"], options["nodeset"]))
    for pin in root.findall("cputune/vcpupin"):
        cell = 0 if int(pin.get("vcpu")) < 16 else 1
        assert [cpu_node[c] for c in parse_cpulist(pin.get("cpuset"))] == [placed["numa_nodes"][cell]]
    controllers = dict((c.get("index"), c) for c in root.findall("devices/controller[@type='pci']"))
    expanders = [c for c in controllers.values() if c.get("model") == "pcie-expander-bus"]
    assert sorted(e.find("target/node").text for e in expanders) == ["0", "1"]
    gpu_cell = dict((a, cell["id"]) for cell in placed["cells"] for a in cell["gpus"] + cell["vfs"])
    elements = root.findall("devices/hostdev") + root.findall("devices/interface[@type='hostdev']")
    assert len(elements) == 6
    # each cell's two GPUs and its VF share a switch on the host (PXB on this tree): the entry says so
    assert sorted(map(sorted, options["pcie_switches"])) == sorted(sorted(cell["gpus"] + cell["vfs"]) for cell in placed["cells"])
    upstreams = {}
    for element in elements:
        source = element.find("source/address")
        host = "%04x:%02x:%02x.%x" % tuple(int(source.get(k), 16) for k in ("domain", "bus", "slot", "function"))
        downstream = controllers[str(int(element.find("address").get("bus"), 16))]
        assert downstream.get("model") == "pcie-switch-downstream-port"
        upstream = controllers[str(int(downstream.find("address").get("bus"), 16))]
        assert upstream.get("model") == "pcie-switch-upstream-port"
        upstreams.setdefault(upstream.get("index"), set()).add(host)
        port = controllers[str(int(upstream.find("address").get("bus"), 16))]
        assert port.get("model") == "pcie-root-port"
        expander = controllers[str(int(port.find("address").get("bus"), 16))]
        assert expander.find("target/node").text == str(gpu_cell[host])
    assert sorted(map(sorted, upstreams.values())) == sorted(map(sorted, options["pcie_switches"]))
    path = tmp_path / "wide.xml"
    path.write_text(to_text(root), encoding="utf-8")
    check = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    again = parse_xml(to_text(root))
    assert not TenantSpec(options).update(again)
    # libvirt's own additions as its qemu driver stores such a definition (libvirt
    # tests/qemuxml2xmloutdata/pcie-expander-bus.x86_64-latest.xml: model names, the expander's
    # slot on pcie-root, the root ports' chassis and port, pcie-root itself) are no change
    stored = parse_xml(to_text(root))
    devices = stored.find("devices")
    devices.insert(0, ET.Element("controller", {"type": "pci", "index": "0", "model": "pcie-root"}))
    for number, controller in enumerate(stored.findall("devices/controller[@type='pci']")):
        if controller.get("model") == "pcie-expander-bus":
            controller.insert(0, ET.Element("model", {"name": "pxb-pcie"}))
            ET.SubElement(controller, "address", {"type": "pci", "domain": "0x0000", "bus": "0x00", "slot": "0x%02x" % (4 + number),
                                                  "function": "0x0"})
        elif controller.get("model") == "pcie-root-port":
            controller.insert(0, ET.Element("model", {"name": "pcie-root-port"}))
            controller.insert(1, ET.Element("target", {"chassis": controller.get("index"), "port": "0x0"}))
        elif controller.get("model") == "pcie-switch-upstream-port":
            controller.insert(0, ET.Element("model", {"name": "x3130-upstream"}))
        elif controller.get("model") == "pcie-switch-downstream-port":
            controller.insert(0, ET.Element("model", {"name": "xio3130-downstream"}))
            controller.insert(1, ET.Element("target", {"chassis": controller.get("index"), "port": "0x0"}))
    assert not TenantSpec(options).update(stored)
    # the domain read back is the planner's existing: the tenant is kept as it is
    kept = PLAN(topology, tenants, {"existing": {"wide": read_assignment(root)}})["placements"]["wide"]
    assert kept["kept"] and kept["cells"] == placed["cells"] and kept["vcpu_pins"] == placed["vcpu_pins"]
    # back on one node: the cells, memnodes and expanders leave, the devices' guest addresses with them; the
    # switches stay, each on a root port of its own (on pcie-root, placed by libvirt), and are then kept
    one = dict(options, numa_cells=[], nodeset=str(placed["numa_nodes"][0]))
    assert TenantSpec(one).update(again)
    assert again.find("cpu/numa") is None and again.find("numatune/memnode") is None
    assert again.find("devices/controller[@model='pcie-expander-bus']") is None
    ports = again.findall("devices/controller[@model='pcie-root-port']")
    assert len(ports) == 2 and all(p.find("address") is None for p in ports)
    assert len(again.findall("devices/controller[@model='pcie-switch-downstream-port']")) == 6
    assert not TenantSpec(one).update(again)
    # and without the switches, the devices' guest addresses leave with them
    plain = dict(one, pcie_switches=[])
    assert TenantSpec(plain).update(again)
    assert again.find("devices/controller[@type='pci']") is None
    assert all(e.find("address") is None for e in again.findall("devices/hostdev"))
    assert not TenantSpec(plain).update(again)


def chain_of(root, element):
    """The models and guest cells from a device's port up to its root bus: [(model, node or None)]."""
    controllers = dict((c.get("index"), c) for c in root.findall("devices/controller[@type='pci']"))
    out = []
    while element.find("address") is not None and str(int(element.find("address").get("bus"), 16)) in controllers:
        element = controllers[str(int(element.find("address").get("bus"), 16))]
        node = element.find("target/node")
        out.append((element.get("model"), node.text if node is not None else None))
    return out


@pytest.mark.parametrize("size, memory_mb, cell_kib", [("1G", 16384, 16 << 20), ("2M", 1001, 1002 * 1024), ("none", 1001, 1001 * 1024)])
def test_a_tenant_on_one_node_gets_one_cell_and_its_devices_carry_its_node(tmp_path, size, memory_mb, cell_kib):
    """A tenant one node holds, with a GPU and a VF (each device's guest NUMA node
    is set): its tenant_domain entry has one guest cell on its node (all of its vCPUs up to
    max_vcpus, its memory in whole hugepages as the domain has it, its devices), built by the
    spanning tenants' code: a memnode on its node, one pcie-expander-bus of guest node 0 with the
    GPU and the VF (PXB on the host) under one emulated switch on it, so that each reads numa_node
    0 in the guest instead of -1. libvirt's schema accepts it, the same entry changes nothing, and
    the domain read back is a one-node tenant the planner keeps."""
    topology = dgx_a100()
    tenants = [{"name": "one", "vcpus": 8, "max_vcpus": 10, "memory_mb": memory_mb, "gpus": 1, "vfs": 1, "hugepage_size": size}]
    plan = PLAN(topology, tenants)
    placed = plan["placements"]["one"]
    assert placed["cells"] is None and placed["numa_node"] is not None
    entries = DOMAINS(plan, tenants, dict(SETTINGS, machine="q35", topology=topology))
    (options, _label), = domain_options(entries)
    devices = placed["gpus"] + placed["vfs"]
    assert options["numa_cells"] == [{"node": placed["numa_node"], "vcpus": "0-9", "memory_kib": cell_kib, "devices": devices}]
    assert options["nodeset"] == str(placed["numa_node"]) and options["pcie_switches"] == [devices]
    root = TenantSpec(options).build()
    assert [(c.get("id"), c.get("cpus"), c.get("memory")) for c in root.findall("cpu/numa/cell")] == [("0", "0-9", str(cell_kib))]
    assert [(m.get("cellid"), m.get("mode"), m.get("nodeset")) for m in root.findall("numatune/memnode")] == [
        ("0", "strict", str(placed["numa_node"]))]
    assert [p.get("nodeset") for p in root.findall("memoryBacking/hugepages/page")] == (["0"] if size != "none" else [])
    expanders = root.findall("devices/controller[@model='pcie-expander-bus']")
    assert [(e.find("target").get("busNr"), e.find("target/node").text) for e in expanders] == [("251", "0")]
    elements = root.findall("devices/hostdev") + root.findall("devices/interface[@type='hostdev']")
    assert len(elements) == 2
    for element in elements:
        assert chain_of(root, element) == [("pcie-switch-downstream-port", None), ("pcie-switch-upstream-port", None),
                                           ("pcie-root-port", None), ("pcie-expander-bus", "0")]
    apply_pinning(root, PinRequest(options["vcpu_pins"], options["emulator_cpus"], options["memory_mode"], options["nodeset"]))
    path = tmp_path / "one.xml"
    path.write_text(to_text(root), encoding="utf-8")
    check = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr + to_text(root)
    assert not TenantSpec(options).update(parse_xml(to_text(root)))
    # read back: one node (no spanning cells), the same node; the planner keeps the tenant where it is
    held = read_assignment(root)
    assert held["cells"] is None and held["numa_node"] == placed["numa_node"]
    kept = PLAN(topology, tenants, {"existing": {"one": held}})["placements"]["one"]
    assert kept["kept"] and kept["cells"] is None and kept["vcpu_pins"] == placed["vcpu_pins"]


def test_one_node_cells_only_for_devices_on_a_q35_machine_and_bound_as_the_domains_memory():
    """No cell for a tenant without GPUs or VFs (its definition as before) nor off q35 (the expander
    needs it); the cell's memnode takes the domain's memory mode (libvirt refuses a strict memnode
    under restrictive memory), for spanning cells too."""
    topology = dgx_a100()
    tenants = [{"name": "plain", "vcpus": 4, "memory_mb": 4096, "gpus": 0, "vfs": 0, "hugepage_size": "none"},
               {"name": "dev", "vcpus": 4, "memory_mb": 4096, "gpus": 1, "vfs": 1, "hugepage_size": "none"}]
    plan = PLAN(topology, tenants)
    q35 = dict((e["name"], e) for e in DOMAINS(plan, tenants, dict(SETTINGS, machine="q35", topology=topology)))
    assert "numa_cells" not in q35["plain"] and len(q35["dev"]["numa_cells"]) == 1
    pc = dict((e["name"], e) for e in DOMAINS(plan, tenants, dict(SETTINGS, machine="pc", topology=topology)))
    assert "numa_cells" not in pc["dev"] and "pcie_switches" not in pc["dev"]
    plain = TenantSpec(dict(q35["plain"], machine="q35")).build()
    assert plain.find("cpu/numa") is None and plain.find("devices/controller") is None
    restrictive = TenantSpec(dict(q35["dev"], memory_mode="restrictive")).build()
    assert [m.get("mode") for m in restrictive.findall("numatune/memnode")] == ["restrictive"]
