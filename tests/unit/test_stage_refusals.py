# -*- coding: utf-8 -*-
"""The gate and the stages agree: a stage's refusal that the gate's check of its call found fails
the gate, naming the stage, the refused input and the fix; and where the gate passes, each host
stage's own call in check mode (as a preview makes it) does not refuse.

The hosts are captured trees of bad shapes, built by the tests' tree builders (tests/tools/dgx_tree.py,
tests/tools/bare_trees.py) with the ConnectX firmware read through the mlxconfig stand-in
(fakes/standins/mlxconfig) in the factory state: SR-IOV off (SRIOV_EN False, NUM_OF_VFS 0), the VPI
ports in InfiniBand mode (LINK_TYPE_P1 IB). Each stage's call is the one site.yml builds from the
example inventory (host_boot, host_vfio and tenant_vms tasks_from options, in a preview).

Here, not under tests/unit/plugins/module_utils/: it runs the filters too (controller code, which
ansible-test units keeps out of the module_utils tests)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.checks import standing_refusals
from ansible_collections.gpuvirt.tenancy.plugins.modules import iommu_grub, preflight_info, tenant_domain, vfio_bind
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.preflight_report import preflight_report
from conftest import REPO_ROOT, run_module  # pylint: disable=import-error
from fakes.paths import STANDINS  # pylint: disable=import-error
from fakes.rdma import StandinCommands  # pylint: disable=import-error


def report_of(info, desired, policy=None):
    """The report the preflight role makes of the gate's read (the action preflight_report's)."""
    return preflight_report(info, desired, policy)["report"]


URI = "test://%s/playbooks/files/preview-libvirt-node.xml" % REPO_ROOT
MODULES = {"boot": iommu_grub.main, "sriov_vfio": vfio_bind.main, "tenants": tenant_domain.main}


def load_tool(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO_ROOT, "tests", "tools", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- which refusals stand: the stage's own call would give them later in this run

def check(error=None, changed=True, result=None, preview=False):
    return {"module": "m", "options": {"preview": {}} if preview else {}, "error": error, "changed": None if error else changed,
            "result": result}


REBOOT = {"reboot_required": True, "firmware_pending": []}
FIRMWARE_LOAD = {"reboot_required": False, "firmware_pending": ["0000:19:00.0"]}
SETTLED = {"reboot_required": False, "firmware_pending": []}


@pytest.mark.parametrize("checks, standing", [
    ({"boot": check("InputError: x")}, ["boot"]),
    # the SR-IOV/VFIO stage runs after the boot stage's reboot or firmware load: its refusal now waits for it
    ({"boot": check(result=REBOOT), "sriov_vfio": check("StateError: the IOMMU is off")}, []),
    ({"boot": check(result=FIRMWARE_LOAD), "sriov_vfio": check("InputError: x")}, []),
    # no reboot first: the stage meets the host the gate read
    ({"boot": check(result=SETTLED), "sriov_vfio": check("InputError: x")}, ["sriov_vfio"]),
    ({"sriov_vfio": check("InputError: x")}, ["sriov_vfio"]),
    ({"boot": check("InputError: x"), "sriov_vfio": check("InputError: y")}, ["boot", "sriov_vfio"]),
    # a preview's tenants call plans on the host as the earlier stages leave it: its refusal stands
    ({"boot": check(result=REBOOT), "sriov_vfio": check("StateError: x"), "tenants": check("InputError: t", preview=True)},
     ["tenants"]),
    # a run's tenants call after stages that change the host is made again on the host they leave
    ({"boot": check(result=REBOOT), "tenants": check("InputError: t")}, []),
    ({"sriov_vfio": check("InputError: x"), "tenants": check("InputError: t")}, ["sriov_vfio"]),
    ({"boot": check(changed=False, result=SETTLED), "sriov_vfio": check(changed=False), "tenants": check("InputError: t")},
     ["tenants"]),
    ({"tenants": check("InputError: t")}, ["tenants"]),
    ({"boot": check(result=REBOOT), "sriov_vfio": check(), "tenants": check()}, []),
    ({}, []),
])
def test_the_refusals_that_stand(checks, standing):
    assert [stage for stage, _check in standing_refusals(checks)] == standing


def test_a_standing_refusal_fails_the_report_naming_the_stage_the_input_and_the_fix():
    topology = {"pci_devices": {}, "numa_nodes": [], "iommu": {"enabled": True, "groups": {"1": []}}}
    refused = "InputError: tenant st-a: its vlan cannot be set on VF 0000:84:00.1: PF 0000:84:00.0 has no netdev. Set link_type"
    report = report_of({"topology": topology, "firmware": {},
                        "stage_checks": {"tenants": dict(check(refused, preview=True), module="tenant_domain")}},
                       {"tenants_from": "gpuvirt_survey_tenants"})
    assert report["status"] == "fail" and report["stage_refusals"] == ["tenants"]
    assert report["failures"] == ["stage tenants: the tenants stage (tenant_domain) refuses this run's call: tenant st-a: its "
                                  "vlan cannot be set on VF 0000:84:00.1: PF 0000:84:00.0 has no netdev. Set link_type"]
    assert report["fixes"][0].startswith("stage tenants: the tenants stage's inputs (gpuvirt_survey_tenants, gpuvirt_tenant_policy")
    assert "this run would stop in the tenants stage" in report["fixes"][0]
    # the same error where the stage would not give it (a reboot first, not a preview) is no finding
    passed = report_of({"topology": topology, "firmware": {}, "stage_checks": {"boot": check(result=REBOOT), "tenants": check(refused)}},
                       {})
    assert passed["status"] != "fail" and passed["stage_refusals"] == []


# ---- the gate and each stage's own call on hosts of bad shapes

GPUS = ["0000:15:00.0", "0000:1d:00.0", "0000:35:00.0", "0000:3d:00.0", "0000:55:00.0", "0000:5d:00.0", "0000:75:00.0",
        "0000:7d:00.0"]
COMPUTE = ["0000:19:00.0", "0000:21:00.0", "0000:39:00.0", "0000:41:00.0", "0000:59:00.0", "0000:61:00.0", "0000:79:00.0",
           "0000:81:00.0"]
STORAGE = ["0000:a1:00.0", "0000:a1:00.1"]
PAGES = [{"size": "1G", "count": 100, "node": node} for node in (1, 3, 5, 7)]
TENANTS = [{"name": "tenant-a", "gpus": 1, "vfs": 1, "vcpus": 16, "memory_mb": 65536, "hugepage_size": "1G", "vlan": 101,
            "state": "running"},
           {"name": "tenant-c", "gpus": 2, "vfs": 2, "vcpus": 24, "memory_mb": 98304, "hugepage_size": "1G", "vlan": 103,
            "state": "running"}]
STORAGE_TENANT = [{"name": "st-a", "vfs": 1, "vcpus": 4, "memory_mb": 4096, "hugepage_size": "none", "vlan": 101}]


def calls(pfs, tenants):
    """The three stages' calls as site.yml builds them from the example inventory in a preview."""
    pf_addresses = [pf["pf"] for pf in pfs]
    return {
        "boot": {"args": [], "bootloader_update": "none", "grub_file": "/etc/default/grub", "iommu": True, "passthrough": True,
                 "pre_bind_driver": "pci-stub", "pre_bind_ids": ["10de:20b0"], "variable": "GRUB_CMDLINE_LINUX", "vendor": "auto",
                 "firmware": {"install": False, "nic_ids": [], "reset": True, "reset_level": 3, "reset_ok": False, "sriov_pfs": pfs},
                 "gpu_stack": {"early_driver": True, "early_driver_before": ["nouveau", "nvidia", "nvidiafb"],
                               "gpu_ids": ["10de:20b0"], "host_gpus": [], "initramfs": True, "manage": True, "tenant_gpus": GPUS},
                 "hugepages": {"at_boot": ["1G"], "enable_units": True, "mounts": [], "pages": PAGES, "persist": True,
                               "persist_unit": "/etc/systemd/system/gpuvirt-hugepages.service"}},
        "sriov_vfio": {"autoprobe": False, "devices": [], "force": False, "gpu_ids": ["10de:20b0"], "gpus": GPUS,
                       "group_policy": "strict", "persist": True, "sriov_pfs": pfs},
        "tenants": {"domain_type": "kvm", "firmware": "efi", "force_off": False, "gpu_ids": ["10de:20b0"], "guest_access": {},
                    "live": True, "machine": "q35", "memory_mode": "strict", "nic_ids": [], "priorities": {"online": {"cpu_shares": 1024}},
                    "shutdown_timeout": 120, "tenants": tenants, "vf_persist": True,
                    "policy": {"emulator": "isolate", "gpus": GPUS, "numa": "required", "pcie_affinity": "prefer",
                               "reserved_cpus": "0-1,128-129", "smt": "whole_cores", "vf_pfs": pf_addresses},
                    "preview": {"gpus": GPUS, "hugepages": PAGES, "sriov_pfs": pfs}},
    }


def factory_firmware(pfs, link_type=True):
    """The stand-in's state of ``pfs`` as the card leaves the factory: SR-IOV off, a VPI port in InfiniBand mode."""
    params = [["SRIOV_EN", {"default": "False(0)", "current": "False(0)", "next": "False(0)", "choices": {"False": 0, "True": 1}}],
              ["NUM_OF_VFS", {"default": "0", "current": "0", "next": "0"}]]
    if link_type:
        params.append(["LINK_TYPE_P1", {"default": "IB(1)", "current": "IB(1)", "next": "IB(1)",
                                        "choices": {"IB": 1, "ETH": 2, "VPI": 3}}])
    return {"devices": dict((pf, {"device_type": "ConnectX5", "params": params}) for pf in pfs)}


def sriov_off(root):
    """SR-IOV off in the ConnectX firmware: no PF shows an SR-IOV capability (no sriov_* in sysfs)."""
    for folder, _dirs, files in os.walk(os.path.join(root, "sys", "devices")):
        for name in files:
            if name.startswith("sriov_"):
                os.remove(os.path.join(folder, name))


def dgx(out):
    load_tool("dgx_tree").write_tree(out)


def dgx_sriov_off(out):
    dgx(out)
    sriov_off(out)


def bare(name):
    """The builder ``name`` of tests/tools/bare_trees.py."""
    def build(out):
        load_tool("bare_trees").TREES[name](out)
    return build


def eth(pfs):
    return [{"pf": pf, "num_vfs": 4, "link_type": "eth"} for pf in pfs]


def ib(pfs):
    return [{"pf": pf, "num_vfs": 4} for pf in pfs]


# name: (tree, gpuvirt_sriov_pfs, tenants, the firmware's PFs, the gate's failed checks (empty: it passes))
SHAPES = {
    # the storage pair: a dual-port ConnectX with SR-IOV off, each port's VFs planned at the addresses the card's
    # layout gives them once the boot stage has set NUM_OF_VFS (projection.connectx_vf_layout)
    "dual-port ConnectX, SR-IOV off, port 1": (dgx, ib(STORAGE[:1]), STORAGE_TENANT, STORAGE, set()),
    "dual-port ConnectX, SR-IOV off, port 2": (dgx, ib(STORAGE[1:]), STORAGE_TENANT, STORAGE, set()),
    "single-port ConnectX, SR-IOV off": (dgx_sriov_off, eth(COMPUTE), TENANTS, COMPUTE, set()),
    "VPI in IB, no IPoIB, link_type eth": (bare("vpi_ib_without_ipoib"), eth(COMPUTE), TENANTS, COMPUTE, set()),
    "VPI in IB, no IPoIB, no link_type": (bare("vpi_ib_without_ipoib"), ib(COMPUTE), TENANTS, COMPUTE,
                                          set("link type %s" % pf for pf in COMPUTE) | {"stage tenants"}),
    "VPI in IB (class 0x0207), link_type eth": (bare("vpi_ib_class"), eth(COMPUTE), TENANTS, COMPUTE, set()),
    "VPI in IB (class 0x0207), no link_type": (bare("vpi_ib_class"), ib(COMPUTE), TENANTS, COMPUTE,
                                               set("link type %s" % pf for pf in COMPUTE) | {"stage tenants"}),
}


@pytest.fixture
def firmware_state(tmp_path):
    return str(tmp_path / "fw.json")


def host(root, state):
    return Host(root, commands=StandinCommands({"mlxconfig": os.path.join(STANDINS, "mlxconfig")},
                                               env={"MLXCONFIG_STANDIN_STATE": state}))


def gate(root, state, stage_calls, pfs, tenants):
    """preflight_info with the stages' calls, and the report the preflight role makes of it."""
    info = run_module(preflight_info.main, {"root": root, "stage_checks": stage_calls, "gpu_ids": ["10de:20b0"],
                                            "libvirt": {"uri": URI, "names": [t["name"] for t in tenants], "foreign": True}},
                      check_mode=True, host=host(root, state))
    assert not info.get("failed"), info.get("msg")
    desired = {"host": "dgx", "gpus": GPUS, "sriov_pfs": pfs, "hugepages": PAGES, "tenants": tenants}
    return info, report_of(info, desired, stage_calls["tenants"]["policy"])


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_where_the_gate_passes_no_stage_refuses(tmp_path, firmware_state, shape):
    build, pfs, tenants, firmware_pfs, failed = SHAPES[shape]
    root = str(tmp_path / "host")
    build(root)
    with open(firmware_state, "w", encoding="utf-8") as handle:
        json.dump(factory_firmware(firmware_pfs, link_type=firmware_pfs == COMPUTE), handle)
    stage_calls = calls(pfs, tenants)
    info, report = gate(root, firmware_state, stage_calls, pfs, tenants)
    assert set(c["name"] for c in report["checks"] if c["status"] == "fail") == failed, report["failures"]
    for name in failed:
        if name.startswith("stage "):
            stage = name[len("stage "):]
            refusal = info["stage_checks"][stage]["error"].split(": ", 1)[1]
            line = [f for f in report["failures"] if f.startswith(name + ":")][0]
            assert refusal in line and "refuses this run's call" in line, line
            assert any(f.startswith(name + ": ") and "this run would stop in the" in f for f in report["fixes"])
    if report["status"] == "fail":
        return
    # the gate passed: each stage's own call, in check mode as in a preview, does not refuse; the SR-IOV/VFIO
    # stage's refusal waits for the boot stage's reboot where the boot stage says one comes first (role host_stages)
    boot = {}
    for stage in ("boot", "sriov_vfio", "tenants"):
        options = dict(stage_calls[stage], root=root, **({"uri": URI} if stage == "tenants" else {}))
        result = run_module(MODULES[stage], options, check_mode=True, host=host(root, firmware_state))
        if stage == "boot":
            boot = result
        if result.get("failed") and stage == "sriov_vfio" and (boot.get("reboot_required") or boot.get("firmware_pending")):
            continue
        assert not result.get("failed"), "%s: the gate passed, the %s stage refuses: %s" % (shape, stage, result.get("msg"))
        if stage == "tenants":
            # every VF a tenant asked a VLAN for is planned with it (an interface with its MAC and VLAN), none dropped
            vlans = dict((vf["address"], vf["vlan"]) for pf in result["vf_settings"] for vf in pf["vfs"])
            for name, placement in result["placements"].items():
                wanted = [t["vlan"] for t in tenants if t["name"] == name][0]
                assert [vlans.get(vf) for vf in placement["vfs"]] == [wanted] * len(placement["vfs"]), (name, vlans)
