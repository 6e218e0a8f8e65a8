# -*- coding: utf-8 -*-
"""Preflight checks over real captures and trees built from real public outputs.

- tests/fixtures/lab/bare.tar: a capture of the bare lab VM (intel_iommu=off, DMAR table present);
  with its DMAR table removed it reads like a host whose BIOS has VT-d off.
- fakes.kernel's cx4lx/v100/rtx trees: the IOMMU-group listings in tests/fixtures/iommu and
  tests/fixtures/pci (no ACS: PF and VFs in one group; GPUs paired in groups; a GPU with its
  root port and audio function).
- ConnectX firmware through tests/unit/fakes/standins/mlxconfig, a STAND-IN for mlxconfig that replays
  the real output format and keeps Next Boot / Current state like the firmware does.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from fakes.paths import STANDINS  # pylint: disable=import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import checks as preflight
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import info as preflight_facts
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import text as preflight_text
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import project
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.rdma import StandinCommands  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, lab_host, nodeless_host, rtx_group_host, v100_pairs_host  # pylint: disable=import-error
from fakes.captured_trees import lab_capture, load_dgx_tree  # pylint: disable=import-error

HERE = os.path.dirname(__file__)
BARE = lab_capture("bare")
STANDIN = os.path.join(STANDINS, "mlxconfig")
LAB_IDS = {"gpu_ids": ["1234:11e8"], "nic_ids": ["1b36:0010"]}
LAB_DESIRED = {
    "host": "lab", "gpus": ["0000:82:00.0"], "sriov_pfs": [{"pf": "0000:81:00.0", "num_vfs": 4}],
    "hugepages": [{"size": "2M", "count": 64, "node": 1}], "host_reserved_mb": 1024,
    "tenants": [{"name": "tenant-a", "gpus": 1, "vfs": 1, "vcpus": 1, "memory_mb": 64},
                {"name": "tenant-b", "vfs": 1, "vcpus": 1, "memory_mb": 64, "hugepage_size": "none"}],
}
LAB_POLICY = {"emulator": "vcpus", "gpus": ["0000:82:00.0"], "vf_pfs": ["0000:81:00.0"]}


def check(report, name):
    return next(c for c in report["checks"] if c["name"] == name)


def lab_report(root=BARE, desired=None, firmware=None, **extra):
    topo = read_topology(root, **LAB_IDS)
    desired = dict(desired or LAB_DESIRED, **extra)
    projected = project(topo, desired["sriov_pfs"], desired["hugepages"])
    plan = plan_tenants(projected, desired["tenants"], LAB_POLICY)
    return topo, preflight.evaluate(topo, desired, firmware or {}, plan)


def no_iommu_copy(tmp_path, vendor=None, vm=None):
    """The bare lab capture without its ACPI DMAR table: what a host with VT-d off in the BIOS shows
    (the lab VM's ``hypervisor`` CPU flag taken out: bare metal); with ``vm`` (a DMI system vendor,
    such as QEMU), what a VM without a virtual IOMMU shows."""
    root = tmp_path / "noiommu"
    shutil.copytree(BARE, root, symlinks=True)
    os.unlink(root / "sys" / "firmware" / "acpi" / "tables" / "DMAR")
    cpuinfo = root / "proc" / "cpuinfo"
    text = cpuinfo.read_text()
    assert " hypervisor" in text  # the lab VM's capture says it is a VM
    cpuinfo.write_text((text if vm else text.replace(" hypervisor", "")).replace("GenuineIntel", vendor or "GenuineIntel"))
    if vm:
        (root / "sys" / "class" / "dmi" / "id").mkdir(parents=True)
        (root / "sys" / "class" / "dmi" / "id" / "sys_vendor").write_text(vm + "\n")
    return str(root)


# ---------------------------------------------------------------------------- the bare lab
def test_bare_lab_capture_reports_iommu_off_pf_edu_and_a_fitting_plan():
    topo, report = lab_report()
    assert topo["iommu"]["firmware_table"] == "DMAR" and not topo["iommu"]["enabled"]
    iommu = check(report, "iommu")
    # the boot stage's change, said once under what it fixes and not among the fixes by hand
    assert iommu["status"] == "boot"
    assert "intel_iommu=off" in iommu["detail"]
    assert iommu["fix"] == ("the boot stage sets intel_iommu=on iommu=pt (removing intel_iommu=off) on the kernel command line "
                            "and reboots once (role host_boot, gpuvirt_reboot_ok)")
    assert [line for line in report["boot_stage"] if line.startswith("iommu:")] == ["iommu: " + iommu["fix"]]
    assert not [line for line in report["fixes"] if "iommu" in line]
    pf = next(s for s in report["sriov_pfs"] if s["address"] == "0000:81:00.0")
    assert (pf["sriov_totalvfs"], pf["sriov_numvfs"], pf["wanted_vfs"], pf["numa_node"]) == (4, 0, 4, 1)
    assert check(report, "sriov 0000:81:00.0")["status"] == "pass"
    assert [(g["address"], g["numa_node"], g["isolated"]) for g in report["gpus"]] == [("0000:82:00.0", 1, None)]
    assert check(report, "isolation")["status"] == "warn"
    assert report["plan"]["fits"] is True
    assert report["plan"]["placements"]["tenant-a"]["gpus"] == ["0000:82:00.0"]
    assert report["plan"]["placements"]["tenant-a"]["vfs"] == ["0000:81:00.0/vf0"]
    # where each tenant's VF is from its GPU (from its node without one), and why none nearer
    assert report["plan"]["placements"]["tenant-a"]["vf_locality"] == {
        "level": "PHB", "why": "VF 0000:81:00.0/vf0 through the PCIe host bridge of its GPU 0000:82:00.0: no VF of the pool is nearer"}
    assert report["plan"]["placements"]["tenant-b"]["vf_locality"]["level"] == "NODE"
    assert report["status"] == "warn" and report["failures"] == []
    table = report["table"]
    for words in ("Preflight lab: WARN", "present yes, enabled NO, ACPI table DMAR", "0000:82:00.0  0x1234:0x11e8  1",
                  "Tenant plan: fits", "tenant-a", "tenant-b",
                  "tenant-a VF locality PHB: VF 0000:81:00.0/vf0 through the PCIe host bridge of its GPU 0000:82:00.0",
                  "tenant-b VF locality NODE: VF 0000:81:00.0/vf1 on node 1 with its vCPUs"):
        assert words in table
    json.dumps(report)  # the JSON file is this dict


def test_require_iommu_enabled_turns_the_warning_into_a_failure():
    _topo, report = lab_report(require_iommu_enabled=True)
    assert check(report, "iommu")["status"] == "fail" and report["status"] == "fail"


@pytest.mark.parametrize("vendor, words", [
    (None, ["BIOS", "no DMAR table", "VT-d"]),
    ("AuthenticAMD", ["BIOS", "no IVRS table", "AMD-Vi"]),
])
def test_host_without_iommu_fails_naming_the_bios_setting(tmp_path, vendor, words):
    _topo, report = lab_report(no_iommu_copy(tmp_path, vendor))
    iommu = check(report, "iommu")
    assert iommu["status"] == "fail" and report["status"] == "fail"
    for word in words:
        assert word in iommu["fix"]
    assert any(word in report["table"] for word in words)
    assert report["failures"] == ["iommu: " + iommu["detail"]]
    assert report["iommu"]["virtual_machine"] is None


@pytest.mark.parametrize("vendor", [None, "AuthenticAMD"])
def test_a_vm_without_iommu_is_told_to_get_a_virtual_one_not_a_bios_setting(tmp_path, vendor):
    """A VM (its CPU flags say hypervisor; DMI names QEMU) has no BIOS setting that adds an IOMMU:
    the fix is the virtual IOMMU its hypervisor gives it (QEMU's intel-iommu on q35, libvirt's
    <iommu model='intel'>), as the lab VM has one (lab/lab.py)."""
    _topo, report = lab_report(no_iommu_copy(tmp_path, vendor, vm="QEMU"))
    iommu = check(report, "iommu")
    assert iommu["status"] == "fail" and "a virtual machine: QEMU" in iommu["detail"]
    assert iommu["fix"].startswith("VM (QEMU): its hypervisor gives it no virtual IOMMU")
    for words in ("-machine q35,kernel-irqchip=split -device intel-iommu,intremap=on,caching-mode=on",
                  "<iommu model='intel'><driver intremap='on' caching_mode='on'/></iommu>", "<ioapic driver='qemu'/>"):
        assert words in iommu["fix"]
    assert "BIOS" not in iommu["fix"] and report["iommu"]["virtual_machine"] == "QEMU"
    table = report["table"].splitlines()
    assert any("a virtual machine (QEMU)" in line for line in table)
    assert max(len(line) for line in table) <= preflight_text.LINE_CHARS


# ---------------------------------------------------------------------------- isolation
def test_lab_with_iommu_and_vfs_each_in_its_own_group(tmp_path):
    host, kernel = lab_host(tmp_path)
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_numvfs", "4")
    topo = read_topology(host.root, **LAB_IDS)
    projected = project(topo, LAB_DESIRED["sriov_pfs"], LAB_DESIRED["hugepages"])
    report = preflight.evaluate(topo, LAB_DESIRED, {}, plan_tenants(projected, LAB_DESIRED["tenants"], LAB_POLICY))
    assert check(report, "iommu")["status"] == "pass"
    assert len(report["vfs"]) == 4 and all(v["isolated"] for v in report["vfs"])
    assert len(set(v["iommu_group"] for v in report["vfs"])) == 4
    assert check(report, "isolation")["status"] == "pass"
    assert report["plan"]["fits"] and report["status"] == "pass"


def test_connectx_pf_and_vfs_in_one_group_without_acs_fail(tmp_path):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    pf = "0000:01:00.0"
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": pf, "num_vfs": 4}]})
    iso = check(report, "isolation")
    assert iso["status"] == "fail" and "ACS" in iso["fix"]
    assert [v["isolated"] for v in report["vfs"]] == [False] * 4
    for vf in report["vfs"]:
        assert pf in vf["group_peers"] and "0000:01:00.1" in vf["group_peers"]
    assert report["status"] == "fail"


def test_gpus_paired_in_groups_fail_and_the_peer_is_named(tmp_path):
    host, _kernel = v100_pairs_host(tmp_path)
    topo = read_topology(host.root)
    report = preflight.evaluate(topo, {})
    gpus = dict((g["address"], g) for g in report["gpus"])
    assert len(gpus) == 6 and not any(g["isolated"] for g in gpus.values())
    first = sorted(gpus)[0]
    assert len(gpus[first]["group_peers"]) == 1
    assert check(report, "isolation")["status"] == "fail"


@pytest.mark.parametrize("nodes, status, words", [
    (1, "pass", "0000:01:00.0 node 0 (sysfs -1, the host's one node)"),
    (2, "warn", "0000:01:00.0 node unknown (sysfs -1); no NUMA node counts the 1 tenant GPU(s) of unknown node"),
])
def test_a_gpu_reporting_no_numa_node_is_on_a_one_node_hosts_node_else_warned(tmp_path, nodes, status, words):
    host, _kernel = nodeless_host(tmp_path, nodes)
    found = check(preflight.evaluate(read_topology(host.root, gpu_ids=["1234:11e8"]), {}), "gpus")
    assert found["status"] == status and words in found["detail"] and "node None" not in found["detail"], found
    if status == "warn":
        assert "numa: preferred" in found["fix"] and "_PXM" in found["fix"]


def test_gpu_with_its_root_port_and_audio_function_is_isolated(tmp_path):
    host, _kernel = rtx_group_host(tmp_path)
    topo = read_topology(host.root)
    iso = preflight.isolation(topo, "0000:01:00.0")
    assert iso["isolated"] is True and iso["companions"] == ["0000:01:00.1"] and iso["peers"] == []
    assert check(preflight.evaluate(topo, {}), "isolation")["status"] == "pass"


# ---------------------------------------------------------------------------- firmware
def fw_state(tmp_path, sriov_en, num_vfs, next_en=None, next_vfs=None):
    boolean = {"False": 0, "True": 1}

    def shown(value):
        return "True(1)" if value else "False(0)"
    devices = {}
    for pf in ("0000:01:00.0", "0000:01:00.1"):
        devices[pf] = {"device_type": "ConnectX4LX", "params": [
            ["SRIOV_EN", {"default": "False(0)", "current": shown(sriov_en), "choices": boolean,
                          "next": shown(sriov_en if next_en is None else next_en)}],
            ["NUM_OF_VFS", {"default": "0", "current": str(num_vfs), "next": str(num_vfs if next_vfs is None else next_vfs)}],
        ]}
    state = tmp_path / "fw.json"
    state.write_text(json.dumps({"devices": devices}))
    return str(state)


def standin_host(root, state):
    """A Host over ``root`` whose mlxconfig is the stand-in (firmware state in ``state``)."""
    return Host(str(root), commands=StandinCommands({"mlxconfig": STANDIN}, env={"MLXCONFIG_STANDIN_STATE": state}))


class NoLookups(RecordedCommands):
    def which(self, name, required=False, hint=None):
        pytest.fail("no tool lookup without ConnectX (looked for %s)" % name)


# What the firmware lacks is a finding of the third kind, "boot": the boot stage sets and loads it.
@pytest.mark.parametrize("current, nxt, status, words", [
    ((True, 8), None, "pass", ["SRIOV_EN=1 NUM_OF_VFS=8"]),
    ((False, 0), None, "boot", ["mlxconfig -d 0000:01:00.0 set SRIOV_EN=1 NUM_OF_VFS=4", "power-cycle", "the boot stage sets"]),
    ((True, 2), None, "boot", ["NUM_OF_VFS=4"]),
    ((False, 0), (True, 8), "boot", ["next boot", "power-cycle", "firmware reset"]),
])
def test_connectx_firmware_read_through_the_standin(tmp_path, current, nxt, status, words):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    state = fw_state(tmp_path, current[0], current[1], *(nxt or (None, None)))
    firmware = preflight_facts.query_firmware(topo, standin_host(tmp_path, state))
    assert sorted(firmware) == ["0000:01:00.0", "0000:01:00.1"]
    assert firmware["0000:01:00.0"]["status"] == "ok"
    assert set(firmware["0000:01:00.0"]["params"]) == {"SRIOV_EN", "NUM_OF_VFS"}
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:01:00.0", "num_vfs": 4}]}, firmware)
    fw = check(report, "firmware 0000:01:00.0")
    assert fw["status"] == status
    for word in words:
        assert word in fw["detail"] + " " + (fw["fix"] or "")
    if status == "boot":
        assert not [f for f in report["failures"] + report["fixes"] if f.startswith("firmware ")]
        assert [b for b in report["boot_stage"] if b.startswith("firmware 0000:01:00.0: the boot stage")]
        assert "Will be fixed by the boot stage" in report["table"]
    with open(state + ".log", encoding="utf-8") as log:
        assert all(json.loads(line)[-1] == "q" for line in log)  # only queries, never a set


@pytest.mark.parametrize("link, link_type, status, words", [
    ("ETH(2)", None, None, []),
    ("ETH(2)", "keep", None, []),
    ("IB(1)", None, "fail", ["are not Ethernet", "set link_type: eth", "link_type: keep"]),
    ("IB(1)", "eth", "boot", ["0000:01:00.0 port 1: IB -> ETH", "sets LINK_TYPE ETH in the firmware (link_type: eth)"]),
    ("VPI(3)", "keep", "fail", ["InfiniBand mode", "GUID per VF"]),
    ("IB(1)", "roce", "fail", ["link_type 'roce'", "eth, ib, keep"]),
])
def test_vpi_link_type_agrees_with_the_boot_stage(tmp_path, link, link_type, status, words):
    """The link type decided as the boot stage decides it (port_modes): each port whose mode changes
    listed (report, table, summary line), a refusal of the boot stage a failure, nothing said otherwise."""
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    state = fw_state(tmp_path, True, 8)
    data = json.loads(open(state, encoding="utf-8").read())
    for dev in data["devices"].values():
        dev["params"].append(["LINK_TYPE_P1", {"default": "IB(1)", "current": link, "next": link,
                                               "choices": {"IB": 1, "ETH": 2, "VPI": 3}}])
    with open(state, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    firmware = preflight_facts.query_firmware(topo, standin_host(tmp_path, state))
    assert set(firmware["0000:01:00.0"]["params"]) == {"SRIOV_EN", "NUM_OF_VFS", "LINK_TYPE_P1"}
    entry = {"pf": "0000:01:00.0", "num_vfs": 4}
    if link_type:
        entry["link_type"] = link_type
    report = preflight.evaluate(topo, {"sriov_pfs": [entry]}, firmware)
    fw = check(report, "firmware 0000:01:00.0")
    assert fw["status"] == "pass" and "LINK_TYPE_P1=%s" % link in fw["detail"]
    found = [c for c in report["checks"] if c["name"].startswith("link type")]
    summary = preflight_text.summary_line(report)
    if status is None:
        assert found == [] and report["port_modes"] == []
        assert "link type" not in report["table"] and "link type" not in summary
        return
    [finding] = found
    assert finding["status"] == status
    for word in words:
        assert word in finding["detail"] + " " + finding["fix"]
    if status == "boot":
        assert report["port_modes"] == [{"pf": "0000:01:00.0", "port": "port 1", "from": "IB", "to": "ETH"}]
        assert "  - 0000:01:00.0 port 1: IB -> ETH" in report["table"].splitlines()
        # the summary line holds LINE_CHARS: this host's failures come first and take it; alone, the change is there
        assert len(summary) <= preflight_text.LINE_CHARS
        alone = preflight_text.summary_line(dict(report, failures=[], warnings=[]))
        assert "link type changes: 0000:01:00.0 port 1: IB -> ETH" in alone
    else:
        assert report["status"] == "fail" and report["port_modes"] == []


def test_vpi_ports_in_ib_mode_of_a_capture_are_listed_from_their_netdevs(tmp_path):
    """On a capture (no firmware read) the DGX A100-class host's VPI ports show their mode by their
    IPoIB netdevs (type 32): each wanted PF's port is listed IB -> ETH with link_type eth, the PFs not
    wanted are not, and without link_type the gate fails as the boot stage would refuse."""
    load_dgx_tree().write_tree(str(tmp_path / "dgx"))
    topo = read_topology(str(tmp_path / "dgx"))
    pfs = [{"pf": "0000:19:00.0", "num_vfs": 4, "link_type": "eth"}, {"pf": "ibp2", "num_vfs": 4, "link_type": "eth"}]
    report = preflight.evaluate(topo, {"sriov_pfs": pfs})
    assert [preflight_text.port_change(c) for c in report["port_modes"]] == [
        "0000:19:00.0 port 1 (mlx5_0, ibp0): IB -> ETH", "0000:39:00.0 port 1 (mlx5_2, ibp2): IB -> ETH"]
    assert check(report, "link type 0000:39:00.0")["status"] == "boot"
    assert "netdevs (sysfs)" in check(report, "link type 0000:39:00.0")["detail"]
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}]})
    assert check(report, "link type 0000:19:00.0")["status"] == "fail" and report["status"] == "fail"
    assert "set link_type: eth" in check(report, "link type 0000:19:00.0")["fix"]


def test_a_vpi_port_without_netdev_reads_its_mode_from_its_rdma_port(tmp_path):
    """NIC0 of the DGX capture with IPoIB not loaded: no netdev, its RDMA port's link_layer InfiniBand (as the RDMA core
    writes it). The port's mode is read from there, so the gate (and the boot stage) refuse it without link_type and
    list IB -> ETH with link_type eth, as for a port whose IPoIB netdev says it."""
    root = str(tmp_path / "dgx")
    load_dgx_tree().write_tree(root)
    pf_dir = os.path.realpath(os.path.join(root, "sys/bus/pci/devices/0000:19:00.0"))
    shutil.rmtree(os.path.join(pf_dir, "net"))
    os.unlink(os.path.join(root, "sys/class/net/ibp0"))
    os.makedirs(os.path.join(pf_dir, "infiniband/mlx5_0/ports/1"))
    with open(os.path.join(pf_dir, "infiniband/mlx5_0/ports/1/link_layer"), "w", encoding="utf-8") as handle:
        handle.write("InfiniBand\n")
    topo = read_topology(root)
    assert topo["pci_devices"]["0000:19:00.0"]["link_layers"] == {"mlx5_0": {"1": "InfiniBand"}}
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}]})
    assert check(report, "link type 0000:19:00.0")["status"] == "fail" and "set link_type: eth" in check(report, "link type 0000:19:00.0")["fix"]
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4, "link_type": "eth"}]})
    assert [preflight_text.port_change(c) for c in report["port_modes"]] == ["0000:19:00.0 port 1 (mlx5_0): IB -> ETH"]


def test_connectx_without_a_tool_says_tool_not_found(tmp_path):
    host, _kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    firmware = preflight_facts.query_firmware(topo, Host(str(tmp_path), commands=RecordedCommands()))
    assert set(e["status"] for e in firmware.values()) == {"tool not found"}
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:01:00.0", "num_vfs": 4}]}, firmware)
    # sysfs already offers 8 VFs: the boot stage installs the tool and sets nothing for SR-IOV (it keeps a larger
    # NUM_OF_VFS), so no line says it sets NUM_OF_VFS=4
    assert check(report, "firmware 0000:01:00.0")["detail"] == "tool not found; SR-IOV on, sysfs offers 8 VFs (sriov_totalvfs)"
    assert "tool not found" in report["table"]
    assert check(report, "firmware 0000:01:00.0")["status"] == "boot"
    assert check(report, "firmware 0000:01:00.0")["fix"] == ("the boot stage installs mstflint (mstconfig) to read the firmware; "
                                                             "SR-IOV needs no firmware change")
    assert not [line for line in report["boot_stage"] + report["fixes"] if "NUM_OF_VFS=4" in line]


@pytest.mark.parametrize("totalvfs, num_vfs, detail, fix", [
    (16, 4, "tool not found; SR-IOV on, sysfs offers 16 VFs (sriov_totalvfs)",
     "the boot stage installs mstflint (mstconfig) to read the firmware; SR-IOV needs no firmware change"),
    (2, 4, "tool not found; SR-IOV on, sysfs offers 2 VFs (sriov_totalvfs)",
     "the boot stage installs mstflint (mstconfig) and raises NUM_OF_VFS from 2 to 4 in the firmware"),
    (None, 4, "tool not found", "the boot stage installs mstflint (mstconfig) and sets SRIOV_EN=1 NUM_OF_VFS=4 in the firmware"),
    (16, 0, "tool not found", None),
])
def test_without_a_firmware_tool_the_boot_stages_change_follows_what_sysfs_shows(totalvfs, num_vfs, detail, fix):
    status, said, change = preflight.firmware_verdict("0000:19:00.0", {"status": "tool not found"}, num_vfs, totalvfs)
    assert (said, change) == (detail, fix) and status == ("boot" if num_vfs else "info")


def test_no_connectx_no_query():
    topo = read_topology(BARE, **LAB_IDS)
    host = Host(BARE, commands=NoLookups())
    assert preflight_facts.query_firmware(topo, host) == {}
    assert host.commands.calls == []


# ---------------------------------------------------------------------------- SR-IOV, hugepages, plan
@pytest.mark.parametrize("pfs, status, words", [
    ([{"pf": "0000:81:00.0", "num_vfs": 8}], "fail", ["8 VFs wanted", "offers 4"]),
    ([{"pf": "0000:99:00.0", "num_vfs": 1}], "fail", ["not found"]),
    ([{"pf": "0000:83:00.0", "num_vfs": 1}], "fail", ["not SR-IOV capable", "BIOS"]),
    ([{"pf": "81:00.0", "num_vfs": 2}], "pass", ["2 wanted"]),
])
def test_sriov_wanted_pfs(pfs, status, words):
    topo = read_topology(BARE, **LAB_IDS)
    report = preflight.evaluate(topo, {"sriov_pfs": pfs})
    name = next(c["name"] for c in report["checks"] if c["name"].startswith("sriov "))
    result = check(report, name)
    assert result["status"] == status
    for word in words:
        assert word in result["detail"] + " " + (result["fix"] or "")


@pytest.mark.parametrize("pages, status", [
    ([{"size": "2M", "count": 64, "node": 1}], "pass"),
    ([{"size": "1G", "count": 2, "node": 1}], "fail"),       # 2048 MiB on a 1968 MiB node
    ([{"size": "2M", "count": 400, "node": "all"}], "pass"),
    ([{"size": "2M", "count": 600, "node": "all"}], "fail"),  # 1200 MiB + 1024 reserved > each node
])
def test_hugepage_headroom(pages, status):
    topo = read_topology(BARE, **LAB_IDS)
    report = preflight.evaluate(topo, {"hugepages": pages, "host_reserved_mb": 1024})
    nodes = dict((n["node"], n) for n in report["numa_nodes"])
    for node in nodes.values():
        assert node["headroom_mb"] == node["memory_mb"] - node["hugepages_mb_after"] - 1024
    assert worst_hugepage_status(report) == status


def worst_hugepage_status(report):
    return preflight.worst(c["status"] for c in report["checks"] if c["name"].startswith("hugepages"))


@pytest.mark.parametrize("pages, match", [
    ([{"size": "3M", "count": 1, "node": 0}], "size '3M'"),
    ([{"size": "2M", "count": "many", "node": 0}], "count 'many'"),
    ([{"size": "2M", "count": 1, "node": "first"}], "node 'first'"),
])
def test_bad_hugepage_input_names_it(pages, match):
    with pytest.raises(InputError, match=match):
        preflight.evaluate(read_topology(BARE, **LAB_IDS), {"hugepages": pages})


def test_unknown_node_fails():
    report = preflight.evaluate(read_topology(BARE, **LAB_IDS), {"hugepages": [{"size": "2M", "count": 1, "node": 5}]})
    assert check(report, "hugepages")["status"] == "fail" and "5" in check(report, "hugepages")["detail"]


def test_tenant_that_does_not_fit_fails_with_the_planners_reason():
    desired = dict(LAB_DESIRED, tenants=LAB_DESIRED["tenants"] + [{"name": "big", "vcpus": 8, "memory_mb": 64, "vfs": 1}])
    _topo, report = lab_report(desired=desired)
    plan = check(report, "plan")
    assert plan["status"] == "fail" and plan["detail"] == "big does not fit (why: the tenant plan)"
    assert report["plan"]["fits"] is False and set(report["plan"]["placements"]) == {"tenant-a", "tenant-b"}
    assert "DOES NOT FIT" in report["table"]
    # the planner's reason, said once: in the report's plan and once in the table, under the tenant plan
    reason = report["plan"]["unplaced"]["big"]
    assert reason and reason not in plan["detail"] and not any(reason in line for line in report["failures"])
    assert " ".join(report["table"].split()).count(" ".join(reason.split())) == 1


def test_a_tenant_that_does_not_fit_a_large_host_is_said_once_in_lines_a_terminal_holds(tmp_path):
    """The DGX A100-class host with a tenant no node can hold: its reason (a clause per node, lines
    long) is wrapped under the tenant plan, once; no line of the table passes
    LINE_CHARS, nor the summary line, nor the rollout's stop lines."""
    load_dgx_tree().write_tree(str(tmp_path / "dgx"))
    topo = read_topology(str(tmp_path / "dgx"), gpu_ids=["10de:20b0"])
    gpus = [g["address"] for g in topo["gpus"]]
    tenants = [{"name": "huge", "gpus": 9, "vfs": 0, "vcpus": 4, "memory_mb": 4096, "hugepage_size": "none"},
               {"name": "small", "gpus": 1, "vcpus": 2, "memory_mb": 1024, "hugepage_size": "none"}]
    plan = plan_tenants(topo, tenants, {"gpus": gpus, "numa": "required"})
    report = preflight.evaluate(topo, {"host": "dgx01", "gpus": gpus, "tenants": tenants}, {}, plan)
    reason = report["plan"]["unplaced"]["huge"]
    assert len(reason) > 2 * preflight_text.LINE_CHARS and set(report["plan"]["placements"]) == {"small"}
    table = report["table"].splitlines()
    assert max(len(line) for line in table) <= preflight_text.LINE_CHARS
    assert " ".join(report["table"].split()).count(" ".join(reason.split())) == 1
    assert check(report, "plan")["detail"] == "huge does not fit (why: the tenant plan)"
    assert len(preflight_text.summary_line(report)) <= preflight_text.LINE_CHARS
    stop = preflight_text.stop_lines(report, ["dgx01"], [], [], "/r/dgx01.json")
    assert max(len(line) for line in stop) <= preflight_text.LINE_CHARS


def test_planner_error_and_no_tenants():
    topo = read_topology(BARE, **LAB_IDS)
    assert check(preflight.evaluate(topo, {}, plan_error="policy: unknown key(s) x"), "plan")["status"] == "fail"
    assert check(preflight.evaluate(topo, {}), "plan")["status"] == "info"
    absent = preflight.evaluate(topo, {"tenants": [{"name": "gone", "state": "absent"}]})
    assert check(absent, "plan")["status"] == "info"


def test_missing_tenant_gpu_fails():
    report = preflight.evaluate(read_topology(BARE, **LAB_IDS), {"gpus": ["0000:07:00.0"]})
    assert check(report, "gpus")["status"] == "fail" and "0000:07:00.0" in check(report, "gpus")["detail"]


@pytest.mark.parametrize("report, path, line", [
    (None, None, "NO REPORT (unreachable, or failed before its report)"),
    ({"status": "pass", "failures": [], "warnings": [], "boot_stage": []}, "/r/h.json", "PASS - every check passed (report: /r/h.json)"),
    ({"status": "boot", "failures": [], "warnings": ["iommu: off"], "boot_stage": ["a", "b"]}, None,
     "BOOT - iommu: off; 2 item(s) the boot stage fixes (role host_boot)"),
])
def test_summary_line_says_what_waits_for_the_boot_stage_and_where_the_report_is(report, path, line):
    assert preflight_text.summary_line(report, path) == line


def test_stop_lines_name_the_tenants_variable_one_line_each():
    """What stops a rollout: a few lines, a tenant that does not fit on its own line with the
    variable the tenants came from, a long reason cut at a clause, no line over the limit."""
    long_reason = "no NUMA node can hold tenant huge (numa: required): " + ", ".join(
        "GPUs short on node %d: 0 free of 0, 9 needed" % n for n in range(8))
    report = {"host": "h1", "checks": [{"name": "iommu", "status": "fail", "detail": "absent", "fix": "BIOS: enable VT-d"},
                                       {"name": "plan", "status": "fail", "detail": "...", "fix": "shrink"}],
              "plan": {"unplaced": {"huge": long_reason, "small": "CPUs short"}, "tenants_from": "gpuvirt_survey_tenants"},
              "fixes": ["iommu: BIOS: enable VT-d", "plan: inventory: shrink or move those tenants (gpuvirt_survey_tenants)"]}
    lines = preflight_text.stop_lines(report, ["h1"], ["h0"], ["h2", "h3"], "/r/h1.json")
    assert lines[0] == "ROLLOUT STOPPED at the batch h1: preflight failed on h1"
    assert lines[1] == "  - iommu: absent"
    assert lines[2].startswith("  - tenant huge (gpuvirt_survey_tenants) does not fit: no NUMA node can hold tenant huge")
    assert lines[2].endswith("... (whole in the report)")
    assert lines[3] == "  - tenant small (gpuvirt_survey_tenants) does not fit: CPUs short"
    assert lines[-2:] == ["  earlier batches, done: h0; later batches, not started: h2, h3", "  report: /r/h1.json"]
    assert lines[4:6] == ["  fix: " + fix for fix in report["fixes"]]
    assert len(lines) == 8 and all(len(line) <= preflight_text.LINE_CHARS for line in lines)


def test_the_plan_names_the_variable_the_tenants_came_from():
    _topo, report = lab_report(tenants=[], tenants_from="gpuvirt_survey_tenants")
    assert check(report, "plan")["detail"] == "no tenants in gpuvirt_survey_tenants"
    _topo, report = lab_report(tenants=[dict(LAB_DESIRED["tenants"][0], gpus=2)], tenants_from="gpuvirt_survey_tenants")
    assert "(gpuvirt_survey_tenants)" in check(report, "plan")["fix"] and report["plan"]["tenants_from"] == "gpuvirt_survey_tenants"


def test_an_infiniband_port_of_a_card_without_a_link_type_setting_is_refused(tmp_path):
    """A card whose firmware query (read on the host) has no LINK_TYPE setting is not VPI: its
    InfiniBand port (IPoIB netdev) cannot be switched, so its VFs are refused with the reason,
    whatever link_type says; its Ethernet ports need nothing."""
    load_dgx_tree().write_tree(str(tmp_path / "dgx"))
    topo = read_topology(str(tmp_path / "dgx"))
    params = {"SRIOV_EN": {"default": "False(0)", "current": "True(1)", "next": "True(1)"},
              "NUM_OF_VFS": {"default": "0", "current": "8", "next": "8"}}
    firmware = {"0000:19:00.0": {"status": "ok", "tool": "/usr/bin/mstconfig", "message": None, "params": params}}
    report = preflight.evaluate(topo, {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4, "link_type": "eth"}]}, firmware)
    finding = check(report, "link type 0000:19:00.0")
    assert finding["status"] == "fail" and report["port_modes"] == []
    assert "no LINK_TYPE setting (not a VPI card)" in finding["fix"] and "GUID per VF" in finding["fix"]
