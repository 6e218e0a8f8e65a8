# -*- coding: utf-8 -*-
"""tenant_domain with ``tenants`` and ``fabric_manager``: the tenants stage on an HGX H100-class board takes each
tenant's Fabric Manager partition in its one call, a starting tenant's activated between its definition and its
start, a removed tenant's deactivated after its removal, every step decided from ``fmpm -l`` before any change.
Against libvirt's test driver (conftest ``libvirt_conn``) and tests/unit/fakes/standins/fmpm, a STAND-IN for
NVIDIA's fmpm that prints what fmpm's source prints and keeps the partitions' state as the Fabric Manager does
(the board's partitions: the published HGX H100 listing, fakes.fabric). The order is read from the stand-in's
record of its calls and, at each fmpm -a / -d, from libvirt itself: which tenant domains exist then and whether
each runs (Witness)."""

from __future__ import annotations

import stat
import sys

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.modules import tenant_domain

from conftest import LIBVIRT_TEST_URI as URI, run_module  # pylint: disable=import-error
from fakes.fabric import STANDIN, h100_state, hgx_stage_host, read_state, write_state  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.system_commands import SystemCommands  # pylint: disable=import-error


class Witness(SystemCommands):
    """The programs of this machine (the stand-in fmpm among them), and at each fmpm -a / -d call which
    tenant domains libvirt has and whether each runs, read from the test driver then: the order of the
    stage's steps as libvirt saw it."""

    def __init__(self, conn):
        super().__init__()
        self.conn = conn
        self.seen = []

    def run(self, argv, check=True, data=None):
        if argv[1:2] in (["-a"], ["-d"]):
            domains = dict((d.name(), bool(d.isActive())) for d in self.conn.listAllDomains(0) if d.name() != "test")
            self.seen.append((argv[1], int(argv[2]), domains))
        return super().run(argv, check=check, data=data)


@pytest.fixture
def board(tmp_path, monkeypatch, libvirt_conn):
    tree, modules = hgx_stage_host(str(tmp_path / "root"))
    state = str(tmp_path / "fmpm.json")
    write_state(state, h100_state())
    monkeypatch.setenv("FMPM_STANDIN_STATE", state)
    witness = Witness(libvirt_conn)
    return LiveHost(tree.root, commands=witness), modules, state, witness


def tenant(name, gpus, **options):
    return dict({"name": name, "gpus": gpus, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none", "firmware": "bios",
                 "state": "running"}, **options)


def call(modules, tenants, fabric=True, **options):
    params = dict({"uri": URI, "tenants": tenants, "domain_type": "test", "policy": {"emulator": "vcpus", "gpu_modules": modules},
                   "gpu_ids": ["10de:2330"], "vf_persist": False, "live": True}, **options)
    if fabric:
        params["fabric_manager"] = {"fmpm": STANDIN}
    return params


def calls(state):
    return read_state(state).get("calls", [])


def active(state):
    return sorted(p["partitionId"] for p in read_state(state)["partitions"] if p["isActive"])


def partition(done, name):
    return done["placements"][name]["nvswitch_partition"]


def test_each_tenants_partition_is_activated_after_its_definition_and_before_its_start(board):
    host, modules, state, witness = board
    done = run_module(tenant_domain.main, call(modules, [tenant("f-a", 1), tenant("f-b", 2)]), host=host, diff=True)
    assert not done.get("failed") and done["changed"], done
    a, b = partition(done, "f-a"), partition(done, "f-b")
    # a 1-GPU tenant gets its 1-GPU partition activated too (the guide's model); the 2-GPU one its pair
    assert len(a["physical_ids"]) == 1 and len(b["physical_ids"]) == 2
    assert calls(state) == [["-l"], ["-a", str(a["id"])], ["-a", str(b["id"])]]
    # at each activation the tenant is defined and not running; the one before it already runs
    assert witness.seen == [("-a", a["id"], {"f-a": False}), ("-a", b["id"], {"f-a": True, "f-b": False})]
    assert done["powered_on"] == ["f-a", "f-b"] and active(state) == sorted([a["id"], b["id"]])
    assert [(s["tenant"], s["id"], s["step"], s["done"]) for s in done["fabric_partitions"]["steps"]] == [
        ("f-a", a["id"], "activate", True), ("f-b", b["id"], "activate", True)]
    [diff] = [d for d in done["diff"] if d["before_header"] == "fabric partitions (active)"]
    assert diff["before"] == ""
    assert "tenant f-a: partition %d (physical IDs %d) activated between its definition and its start\n" % (
        a["id"], a["physical_ids"][0]) in diff["after"]
    # the converged host: the partitions read, nothing to do
    again = run_module(tenant_domain.main, call(modules, [tenant("f-a", 1), tenant("f-b", 2)]), host=host)
    assert again["changed"] is False and again["fabric_partitions"]["steps"] == [], again
    assert calls(state)[3:] == [["-l"]]


def test_a_removed_tenants_partition_is_deactivated_after_its_removal(board):
    host, modules, state, witness = board
    first = run_module(tenant_domain.main, call(modules, [tenant("f-a", 1), tenant("f-b", 4)]), host=host)
    assert not first.get("failed"), first
    b = partition(first, "f-b")
    gone = [tenant("f-a", 1), tenant("f-b", 4, state="absent", force_off=True, shutdown_timeout=0)]
    removed = run_module(tenant_domain.main, call(modules, gone), host=host)
    assert not removed.get("failed") and removed["removed"] == ["f-b"], removed
    # at the deactivation the tenant's domain is gone
    assert witness.seen[-1] == ("-d", b["id"], {"f-a": True})
    assert calls(state)[-2:] == [["-l"], ["-d", str(b["id"])]] and b["id"] not in active(state)
    assert removed["fabric_partitions"]["steps"] == [{"tenant": "f-b", "id": b["id"], "physical_ids": b["physical_ids"],
                                                     "step": "deactivate", "done": True}]


def test_a_partition_freed_by_a_removal_of_the_same_call_may_be_taken(board):
    """Removals and their deactivations come first: a new tenant may take GPUs a removed one's partition held."""
    host, modules, state, witness = board
    quad = sorted(m for m, n in modules.items() if n <= 4)
    first = run_module(tenant_domain.main, call(modules, [tenant("f-b", quad)]), host=host)
    assert not first.get("failed") and partition(first, "f-b")["id"] == 1, first
    # modules 1 and 3: partition 3, inside partition 1 (modules 1-4), which f-b's removal frees
    pair = sorted(m for m, n in modules.items() if n in (1, 3))
    swap = [tenant("f-b", quad, state="absent", force_off=True, shutdown_timeout=0), tenant("f-c", pair)]
    done = run_module(tenant_domain.main, call(modules, swap), host=host)
    assert not done.get("failed"), done
    assert partition(done, "f-c")["id"] == 3
    assert [(step, number) for step, number, _domains in witness.seen[1:]] == [("-d", 1), ("-a", 3)]
    assert witness.seen[-1][2] == {"f-c": False} and active(state) == [3]
    # the same partitions asked without the removal: refused, f-b's partition holds the GPUs
    write_state(state, h100_state(active=(1,)))
    message = refused(host, modules, [tenant("f-d", sorted(m for m, n in modules.items() if n in (2, 4)))])
    assert "partition 4 (physical IDs 2, 4) cannot be activated: partition 1 (physical IDs 1, 2, 3, 4) is active" in message


def test_check_mode_reads_the_partitions_and_shows_the_steps(board):
    host, modules, state, witness = board
    done = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2)]), host=host, check_mode=True, diff=True)
    assert not done.get("failed") and done["changed"], done
    a = partition(done, "f-a")
    assert calls(state) == [["-l"]] and witness.seen == [] and active(state) == []
    assert done["fabric_partitions"] == {"read": True, "steps": [
        {"tenant": "f-a", "id": a["id"], "physical_ids": a["physical_ids"], "step": "activate", "done": False}]}
    [diff] = [d for d in done["diff"] if d["before_header"] == "fabric partitions (active)"]
    assert diff["after"].startswith("partition %d: physical IDs %s\n" % (a["id"], ", ".join(map(str, a["physical_ids"]))))


def test_without_the_option_nothing_asks_the_fabric_manager(board):
    host, modules, state, witness = board
    done = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2)], fabric=False), host=host)
    assert not done.get("failed") and done["powered_on"] == ["f-a"], done
    assert calls(state) == [] and "fabric_partitions" not in done


def refused(host, modules, tenants, check_mode=False):
    done = run_module(tenant_domain.main, call(modules, tenants), host=host, check_mode=check_mode)
    assert done.get("failed") and done["changed"] is False, done
    return done["msg"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_partition_another_active_one_holds_is_refused_before_any_change(board, libvirt_conn, check_mode):
    host, modules, state, witness = board
    write_state(state, h100_state(active=(1,)))  # modules 1-4, held by no tenant of the list
    message = refused(host, modules, [tenant("f-a", [m for m, n in modules.items() if n == 2])], check_mode)
    assert message.startswith("tenant f-a: partition 8 (physical IDs 2) cannot be activated: partition 1 (physical IDs 1, 2, 3, 4) "
                              "is active and holds GPUs 2; deactivate it first"), message
    assert calls(state) == [["-l"]] and [d.name() for d in libvirt_conn.listAllDomains(0)] == ["test"]


def test_a_partition_the_fabric_manager_does_not_list_is_refused(board, libvirt_conn):
    host, modules, state, witness = board
    listing = h100_state()
    listing["partitions"] = [p for p in listing["partitions"] if p["partitionId"] != 7]  # module 1 not seen by the FM
    write_state(state, listing)
    message = refused(host, modules, [tenant("f-a", [m for m, n in modules.items() if n == 1])])
    assert message.startswith("tenant f-a: partition 7 is not in the Fabric Manager's list (fmpm -l lists 0, 1, 2, 3, 4, 5, 6, 8,")
    assert calls(state) == [["-l"]] and [d.name() for d in libvirt_conn.listAllDomains(0)] == ["test"]


def test_a_partition_listed_with_other_gpus_is_refused(board, libvirt_conn):
    host, modules, state, witness = board
    listing = h100_state()
    listing["partitions"][7]["gpuInfo"][0]["physicalId"] = 2  # the FM's partition 7 holds module 2, the plan's module 1
    write_state(state, listing)
    message = refused(host, modules, [tenant("f-a", [m for m, n in modules.items() if n == 1])])
    assert message.startswith("tenant f-a: partition 7 holds the GPUs of physical IDs 2 on this board, not 1; the plan's module "
                              "IDs (policy.gpu_modules) and the Fabric Manager disagree"), message
    assert [d.name() for d in libvirt_conn.listAllDomains(0)] == ["test"]


def test_a_tenant_whose_partition_is_not_known_is_refused(board, libvirt_conn):
    host, modules, state, witness = board
    done = run_module(tenant_domain.main, dict(call(modules, [tenant("f-a", 1)]), policy={"emulator": "vcpus"}), host=host)
    assert done.get("failed") and done["msg"].startswith("tenant f-a: its GPUs (GPUs 0000:") and \
        "has no known Fabric Manager partition (policy.gpu_modules not given" in done["msg"], done
    assert "give policy.gpu_modules" in done["msg"] and calls(state) == []
    assert [d.name() for d in libvirt_conn.listAllDomains(0)] == ["test"]


def test_a_refusal_of_the_fabric_manager_mid_way_leaves_the_tenant_defined_not_started(board, tmp_path, libvirt_conn):
    """Another client of the Fabric Manager activates partition 2 (modules 5-8) after the stage read the list: the
    Fabric Manager refuses the second tenant's partition (FM_ST_IN_USE), the call stops there, says what it did."""
    host, modules, state, witness = board
    racer = tmp_path / "fmpm-racing"
    racer.write_text("#!%s\nimport json, os, sys\npath = os.environ['FMPM_STANDIN_STATE']\nstate = json.load(open(path))\n"
                     "if sys.argv[1:3] == ['-a', '5']:\n    state['partitions'][2]['isActive'] = 1\n    json.dump(state, open(path, 'w'))\n"
                     "os.execv(%r, [%r] + sys.argv[1:])\n" % (sys.executable, STANDIN, STANDIN), encoding="utf-8")
    racer.chmod(racer.stat().st_mode | stat.S_IXUSR)
    one, pair = [m for m, n in modules.items() if n == 1], sorted(m for m, n in modules.items() if n in (5, 7))
    params = dict(call(modules, [tenant("f-a", one), tenant("f-b", pair)]), fabric_manager={"fmpm": str(racer)})
    done = run_module(tenant_domain.main, params, host=host)
    assert done.get("failed") and done["changed"] is True, done
    assert done["msg"].startswith("tenant f-b: the Fabric Manager did not activate partition 5: command failed (rc=249): ")
    assert "Failed to activate partition. fmReturn: -7" in done["msg"]
    assert done["msg"].endswith("f-b is defined, not started; done before it: tenant f-a defined; partition 7 activated "
                                "(tenant f-a); tenant f-a started; tenant f-b defined"), done["msg"]
    domains = dict((d.name(), bool(d.isActive())) for d in libvirt_conn.listAllDomains(0) if d.name() != "test")
    assert domains == {"f-a": True, "f-b": False}


def test_a_running_tenant_without_its_partition_is_left_running_and_said(board):
    host, modules, state, witness = board
    first = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2)], fabric=False), host=host)
    assert not first.get("failed") and first["powered_on"] == ["f-a"], first
    again = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2)]), host=host, diff=True)
    # the one change: libvirt's autostart off (a host's boot would start it before its partition is active)
    assert again["fabric_partitions"]["steps"] == [], again
    assert [(d["before"], d["after"]) for d in again["diff"] if d["before_header"] == "f-a (autostart)"] == [
        ("autostart: enable\n", "autostart: disable\n")] and again["changed"] is True
    assert any(w.startswith("tenant f-a runs while its Fabric Manager partition %d is not active" % partition(first, "f-a")["id"])
               for w in again["warnings"]), again
    assert calls(state) == [["-l"]]
    third = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2)]), host=host)
    assert third["changed"] is False and third["fabric_partitions"]["steps"] == [], third


def test_a_tenant_with_a_partition_is_not_autostarted_and_one_asking_for_it_is_refused(board):
    """At the host's boot nothing activates a partition before libvirt's autostart starts the domain, so a tenant
    with a partition gets autostart off (the stage starts it after activating); asking autostart true is refused."""
    host, modules, state, witness = board
    done = run_module(tenant_domain.main, call(modules, [tenant("f-a", 2), tenant("f-c", [], vcpus=1)]), host=host)
    assert not done.get("failed"), done
    assert not witness.conn.lookupByName("f-a").autostart() and witness.conn.lookupByName("f-c").autostart()
    refused = run_module(tenant_domain.main, call(modules, [tenant("f-b", 1, autostart=True)]), host=host)
    assert refused.get("failed") and "tenant f-b: autostart true would start it at the host's boot" in refused["msg"], refused
    assert "f-b" not in [d.name() for d in witness.conn.listAllDomains(0)]


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"


def test_the_run_that_starts_the_service_vm_holds_the_partitioned_tenants_until_the_fabric_manager_answers(board, tmp_path):
    """With fabric_vm and fabric_manager in one call, the service VM does not run before the call, so no Fabric
    Manager can answer it: the tenants with partitions are defined and not started, nothing asks fmpm; the next
    run (the service VM running) reads the Fabric Manager, activates their partitions and starts them."""
    import subprocess  # pylint: disable=import-outside-toplevel
    host, modules, state, witness = board
    base = tmp_path / "root" / "srv" / "fm.qcow2"
    base.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(base), "1G"], check=True)
    service = {"name": "fm", "vcpus": 1, "memory_mb": 64, "image": {"base": "/srv/fm.qcow2", "size_gb": 1},
               "address": "192.168.150.5/24", "firmware": "bios", "hugepage_size": "none"}
    access = {"management": {"network": "default"}, "ssh_authorized_keys": [KEY]}
    params = call(modules, [tenant("f-a", 2)], fabric_vm=service, guest_access=access)
    first = run_module(tenant_domain.main, params, host=host)
    assert not first.get("failed") and first["changed"], first
    assert first["fabric_held"] == ["f-a"] and first["powered_on"] == ["fm"], first
    assert calls(state) == [] and active(state) == []
    assert any("f-a" in w and "192.168.150.5" in w for w in first.get("warnings", [])), first.get("warnings")
    assert not host_domain_running(witness.conn, "f-a") and host_domain_running(witness.conn, "fm")
    again = run_module(tenant_domain.main, params, host=host)
    assert not again.get("failed") and again["fabric_held"] == [], again
    a = partition(again, "f-a")
    assert calls(state) == [["-l"], ["-a", str(a["id"])]] and active(state) == [a["id"]]
    assert witness.seen == [("-a", a["id"], {"fm": True, "f-a": False})] and again["powered_on"] == ["f-a"]


def host_domain_running(conn, name):
    return bool(conn.lookupByName(name).isActive())
