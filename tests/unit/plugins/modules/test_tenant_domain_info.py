# -*- coding: utf-8 -*-
"""tenant_domain_info on libvirt's test driver, and the round trip the tenant_vms role makes:
plan -> tenant_domain (+ numa_pin) -> tenant_domain_info -> plan again with ``existing``: every
tenant is kept where it is, and a new tenant gets only what is left; and the role's own path,
the plan's tenant_domains entries, one tenant_domain call for all tenants, run twice."""

from __future__ import annotations

import uuid

import libvirt
import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.modules import numa_pin, tenant_domain, tenant_domain_info

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.packages import debian_libvirt  # pylint: disable=import-error
from placement_topologies import LAB_EDU, lab  # pylint: disable=import-error

POLICY = {"numa": "preferred", "reserved_cpus": [0]}


def define(placement):
    hugepages = placement["hugepages"]["size"] if placement["hugepages"] else None
    result = run_module(tenant_domain.main, {
        "name": placement["name"], "uri": URI, "domain_type": "test", "arch": "i686", "vcpus": placement["vcpus"],
        "memory_mb": placement["memory_mb"], "hugepage_size": hugepages, "gpus": placement["gpus"], "vfs": placement["vfs"],
        "network_vfs": placement["network_vfs"]})
    assert not result.get("failed"), result
    pin = {"name": placement["name"], "uri": URI, "vcpu_pins": placement["vcpu_pins"],
           "emulator_cpus": ",".join(str(c) for c in placement["emulator_cpus"]), "nodeset": str(placement["numa_node"])}
    if hugepages:
        pin["hugepages"] = {"size": hugepages}
    result = run_module(numa_pin.main, pin)
    assert not result.get("failed"), result


def test_round_trip_keeps_every_tenant(libvirt_conn):
    del libvirt_conn
    suffix = uuid.uuid4().hex[:6]
    tenants = [{"name": "a-" + suffix, "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64},
               {"name": "b-" + suffix, "vfs": 1, "vcpus": 1, "memory_mb": 64, "emulator": "housekeeping", "hugepage_size": "none"}]
    topology = lab(pages_2m=(0, 64))
    first = plan_tenants(topology, tenants, POLICY)
    assert sorted(first["placements"]) == sorted(t["name"] for t in tenants)
    for placement in first["placements"].values():
        define(placement)
    names = [t["name"] for t in tenants] + ["c-" + suffix]
    info = run_module(tenant_domain_info.main, {"names": names, "uri": URI})
    assert not info["changed"] and sorted(info["domains"]) == sorted(t["name"] for t in tenants)
    a = info["domains"]["a-" + suffix]
    assert (a["numa_node"], a["vcpu_pins"], a["emulator_cpus"], a["hugepages"], a["active"]) == (1, {"0": "2"}, "3", {"size": "2M", "node": 1}, False)
    assert LAB_EDU in a["hostdevs"]
    # tenant order reversed and a newcomer first: the defined tenants stay where they are
    again = plan_tenants(topology, [{"name": "c-" + suffix, "gpus": 1, "vcpus": 1, "memory_mb": 64}] + tenants[::-1],
                         dict(POLICY, existing=info["domains"]))
    for name, placement in first["placements"].items():
        kept = again["placements"][name]
        assert kept["kept"]
        for key in ("numa_node", "gpus", "vfs", "vcpu_pins", "emulator_cpus", "hugepages"):
            assert kept[key] == placement[key], key
    assert "GPUs short on node 1" in again["unplaced"]["c-" + suffix]


def test_unknown_names_are_left_out(libvirt_conn):
    del libvirt_conn
    assert run_module(tenant_domain_info.main, {"names": ["nope"], "uri": URI})["domains"] == {}


def test_runs_on_an_injected_host(libvirt_conn, tmp_path):
    """The one host seam: a Host over a temporary tree, nothing patched; libvirt from ``uri``."""
    name = "info-" + uuid.uuid4().hex[:6]
    libvirt_conn.defineXML("<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>"
                           "<os><type arch='i686'>hvm</type></os></domain>" % name)
    host = Host(str(tmp_path), commands=RecordedCommands())
    result = run_module(tenant_domain_info.main, {"names": [name, "nope"], "uri": URI}, host=host)
    assert not result["changed"] and list(result["domains"]) == [name]
    assert (result["domains"][name]["vcpus"], result["domains"][name]["memory_mb"]) == (2, 64)
    assert host.commands.calls == []


# --------------------------------------------------------------------------- the tenant_vms role's path
SETTINGS = {"domain_type": "test", "machine": None, "memory_mode": "strict", "priorities": {"online": {"cpu_shares": 1024}}}
LAB_POLICY = {"numa": "preferred", "reserved_cpus": [0], "smt": "whole_cores", "emulator": "isolate"}


def converge(topology, tenants, check_mode=False):
    """What tenant_vms does: read the domains, plan keeping them, one tenant_domain call for all;
    -> (each tenant's result in the plan's order, the call's result)."""
    names = [t["name"] for t in tenants]
    existing = run_module(tenant_domain_info.main, {"names": names, "uri": URI})["domains"]
    plan = tenant_plan.plan(topology, tenants, dict(LAB_POLICY, existing=existing))  # what filter plan_tenants returns
    assert not plan["unplaced"], plan["unplaced"]
    entries = [dict(args, arch="i686") for args in tenant_plan.tenant_domains(plan, tenants, dict(SETTINGS, live=True))]
    result = run_module(tenant_domain.main, {"uri": URI, "domains": entries}, check_mode=check_mode, diff=check_mode)
    assert not result.get("failed"), result
    return list(result["domains"].values()), result


def live_pins(conn, name):
    return [[cpu for cpu, on in enumerate(cpus) if on] for cpus in conn.lookupByName(name).vcpuPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE)]


def test_role_path_defines_pins_and_starts_each_tenant_in_one_call(libvirt_conn):
    suffix = uuid.uuid4().hex[:6]
    a, b = "a-" + suffix, "b-" + suffix
    tenants = [{"name": a, "gpus": [LAB_EDU], "vfs": 1, "vcpus": 1, "max_vcpus": 2, "memory_mb": 64, "hugepage_size": "2M",
                "state": "running"},
               {"name": b, "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "emulator": "housekeeping"}]
    topology = lab(pages_2m=(0, 64), cpus_per_node=4)
    first, call = converge(topology, tenants)
    assert [r["changed"] for r in first] == [True, True] and [r["powered_on"] for r in first] == [True, False]
    # the running tenant comes back when the host boots, the defined one does not
    assert call["autostart"] == [a] and libvirt_conn.lookupByName(a).autostart() and not libvirt_conn.lookupByName(b).autostart()
    info = run_module(tenant_domain_info.main, {"names": [a, b], "uri": URI})["domains"]
    assert (info[a]["numa_node"], info[a]["vcpu_pins"], info[a]["emulator_cpus"], info[a]["active"]) == (1, {"0": "4"}, "5", True)
    assert (info[b]["vcpu_pins"], info[b]["emulator_cpus"], info[b]["active"]) == ({"0": "6"}, "0", False)
    assert live_pins(libvirt_conn, a) == [[4]]
    # the idempotence run
    again, call = converge(topology, tenants)
    assert [r["changed"] for r in again] == [False, False] and not call["changed"]
    # the lab's resize step: check mode shows the new vCPU pinned on node 1 and changes nothing, then it happens live
    tenants[0]["vcpus"] = 2
    check, call = converge(topology, tenants, check_mode=True)
    assert call["diff"][0]["before_header"] == "%s (persistent XML)" % a
    assert '<vcpupin vcpu="1" cpuset="7" />' in call["diff"][0]["after"]
    assert '<vcpu placement="static">2</vcpu>' in call["diff"][0]["after"]
    assert not check[1]["changed"] and live_pins(libvirt_conn, a) == [[4]]
    resized, _call = converge(topology, tenants)
    assert resized[0]["changed"] and resized[0]["live_changed"]
    # the test driver has no live scheduler parameters: only the QoS waits for a restart there
    assert [r for r in resized[0]["restart_reasons"] if "QoS (its live values cannot be read" not in r] == []
    assert live_pins(libvirt_conn, a) == [[4], [7]]
    assert [r["changed"] for r in converge(topology, tenants)[0]] == [False, False]


# --------------------------------------------------------------------------- domains that are not tenants
FOREIGN_XML = """<domain type='test'><name>%s</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<memoryBacking><hugepages><page size='2048' unit='KiB'/></hugepages></memoryBacking>
<cputune><vcpupin vcpu='0' cpuset='3'/><emulatorpin cpuset='2'/></cputune>
<numatune><memory mode='strict' nodeset='1'/></numatune>
<os><type arch='i686'>hvm</type></os><devices>
<interface type='hostdev'><source><address type='pci' domain='0x0000' bus='0x81' slot='0x00' function='0x2'/></source></interface>
<hostdev mode='subsystem' type='pci' managed='no'><source><address domain='0x0000' bus='0x82' slot='0x00' function='0x0'/></source></hostdev>
</devices></domain>"""


def test_domains_not_listed_are_reported_as_foreign(libvirt_conn):
    other = "legacy-" + uuid.uuid4().hex[:6]
    libvirt_conn.defineXML(FOREIGN_XML % other).create()
    result = run_module(tenant_domain_info.main, {"names": ["nope"], "uri": URI})
    assert result["domains"] == {}
    held = result["foreign"][other]
    # a VF held as <interface type='hostdev'> counts as much as a PCI hostdev
    assert held["hostdevs"] == [LAB_EDU, "0000:81:00.2"]
    assert (held["cpus"], held["numa_node"], held["hugepages"], held["active"]) == ("2-3", 1, {"size": "2M", "node": 1, "count": 32}, True)
    # listed, it is a tenant's domain, not a foreign one
    listed = run_module(tenant_domain_info.main, {"names": [other], "uri": URI})
    assert other in listed["domains"] and other not in listed["foreign"]
    assert run_module(tenant_domain_info.main, {"names": [], "uri": URI, "foreign": False})["foreign"] == {}


@pytest.mark.parametrize("running", [False, True])
def test_role_path_never_gives_what_a_foreign_domain_holds(libvirt_conn, running):
    """The tenant_vms path with a domain that is not in the tenant list (running or not): its GPU,
    its VF (an interface hostdev), its CPUs and its hugepages are out of the plan; it is reported,
    neither redefined nor removed; a tenant asking for its GPU by address is refused naming it."""
    suffix = uuid.uuid4().hex[:6]
    other = "legacy-" + suffix
    domain = libvirt_conn.defineXML(FOREIGN_XML % other)
    if running:
        domain.create()
    before = domain.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
    topology = lab(pages_2m=(0, 64), cpus_per_node=4)
    tenants = [{"name": "a-" + suffix, "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64},
               {"name": "b-" + suffix, "vfs": 4, "vcpus": 1, "memory_mb": 64},
               {"name": "c-" + suffix, "gpus": [LAB_EDU], "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"},
               {"name": "d-" + suffix, "vcpus": 1, "memory_mb": 64}]
    info = run_module(tenant_domain_info.main, {"names": [t["name"] for t in tenants], "uri": URI})
    plan = tenant_plan.plan(topology, tenants, dict(LAB_POLICY, existing=info["domains"]), info["foreign"])
    assert plan["foreign"][other]["gpus"] == [LAB_EDU] and plan["foreign"][other]["vfs"] == ["0000:81:00.2"]
    given = [x for p in plan["placements"].values() for x in p["gpus"] + p["vfs"]]
    cpus = [c for p in plan["placements"].values() for c in p["cpus"]]
    assert LAB_EDU not in given and "0000:81:00.2" not in given and not set(cpus) & {2, 3}
    # the only GPU is held: a count does not fit, an address is refused with the holder's name
    assert "GPUs short" in plan["unplaced"]["a-" + suffix]
    assert other in plan["unplaced"]["c-" + suffix]
    # three VFs are left of four
    assert "VFs short" in plan["unplaced"]["b-" + suffix]
    # node 1's 2M pool lost the foreign domain's 32 pages: 32 left for d
    assert plan["placements"]["d-" + suffix]["hugepages"]["count"] == 32
    assert plan["free"]["1"]["hugepages"]["2M"] == 0
    assert other not in plan["released"] and tenant_plan.tenant_removals(plan, tenants, {}) == []
    assert other not in [a["name"] for a in tenant_plan.tenant_domains(plan, tenants, SETTINGS)]
    results = [run_module(tenant_domain.main, dict(args, uri=URI, arch="i686"))
               for args in tenant_plan.tenant_domains(plan, tenants, SETTINGS)]
    assert not any(r.get("failed") for r in results), results
    assert libvirt_conn.lookupByName(other).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before
    assert libvirt_conn.lookupByName(other).isActive() == running


# --------------------------------------------------------------------------- the libvirt service, for libvirt_host
def service_commands(missing=()):
    """A Debian host with libvirt's packages (but ``missing``), libvirtd enabled and running."""
    return RecordedCommands(replies=debian_libvirt(missing))


def test_service_and_domains_in_one_read(libvirt_conn, tmp_path):
    del libvirt_conn
    host = Host(str(tmp_path), commands=service_commands())
    result = run_module(tenant_domain_info.main, {"names": ["nope"], "uri": URI, "service": {}}, host=host)
    assert not result["changed"] and result["domains_read"] and result["domains"] == {} and "test" in result["foreign"]
    assert result["service"] == {"family": "Debian", "packages": ["libvirt-daemon-system", "qemu-system-x86", "python3-libvirt",
                                                                  "libxml2-utils"],
                                 "missing": [], "enabled": "enabled", "active": "active", "answers": True, "message": None}
    assert result["query"] == {"names": ["nope"], "foreign": True, "uri": URI,
                               "service": {"name": "libvirtd", "uefi": False}}


NO_LIBVIRT = "test:///no/such/definitions.xml"


def test_a_libvirt_that_does_not_answer_is_an_answer_with_service(tmp_path):
    host = Host(str(tmp_path), commands=service_commands(missing=["python3-libvirt"]))
    result = run_module(tenant_domain_info.main, {"names": ["a"], "uri": NO_LIBVIRT, "service": {}}, host=host)
    assert "failed" not in result and result["domains_read"] is False and (result["domains"], result["foreign"]) == ({}, {})
    assert result["service"]["missing"] == ["python3-libvirt"] and result["service"]["answers"] is False
    assert "cannot connect to %s" % NO_LIBVIRT in result["service"]["message"]
    # without service, the domains are what was asked: no answer fails, naming the URI
    failed = run_module(tenant_domain_info.main, {"names": ["a"], "uri": NO_LIBVIRT}, host=Host(str(tmp_path)))
    assert failed["failed"] and "uri: cannot connect to %s" % NO_LIBVIRT in failed["msg"]


def test_bad_service_options_name_the_option(tmp_path):
    result = run_module(tenant_domain_info.main, {"names": [], "uri": URI, "service": {"uefi": "maybe"}},
                        host=Host(str(tmp_path), commands=RecordedCommands()))
    assert result["failed"] and "uefi" in result["msg"]
