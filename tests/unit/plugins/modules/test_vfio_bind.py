# -*- coding: utf-8 -*-
"""vfio_bind end to end over the lab layout (fakes.kernel.lab_host): each run gets an
injected Host over the tree, sysfs writes going to the FakeKernel stand-in and programs to a
RecordedCommands (none is run off the live machine)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.modules import vfio_bind
from conftest import run_module  # pylint: disable=import-error
from fakes.live import LiveHost  # pylint: disable=import-error
from fakes.commands import RecordedCommands, standin_reply  # pylint: disable=import-error
from fakes.interrupt import tree_state  # pylint: disable=import-error
from fakes.kernel import GPU_AUDIO, NIC_PF, FakeKernel, domain_xml, lab_host, lab_host_with_nic, lab_host_with_vfs  # pylint: disable=import-error
from fakes.servers import build_dgx_a100_class  # pylint: disable=import-error

PF = "0000:81:00.0"


@pytest.fixture
def lab(tmp_path):
    return lab_host_with_vfs(tmp_path / "root")


def run(lab, args, **kwargs):
    tree, kernel = lab
    commands = RecordedCommands()
    result = run_module(vfio_bind.main, args, host=Host(tree.root, commands=commands, kernel=kernel), **kwargs)
    assert commands.calls == []
    return result


def test_bind_gpu_and_vfs_then_nothing_to_do(lab):
    host, kernel = lab
    args = {"devices": ["0000:82:00.0"], "vfs_of": [PF]}
    first = run(lab, args)
    assert first["changed"] and not first.get("failed")
    by = {d["address"]: d for d in first["devices"]}
    assert (by["0000:82:00.0"]["driver_before"], by["0000:82:00.0"]["driver_after"]) == ("pci-stub", "vfio-pci")
    for vf in ("0000:81:00.1", "0000:81:00.2", "0000:81:00.3", "0000:81:00.4"):
        assert by[vf]["driver_before"] is None and by[vf]["driver_after"] == "vfio-pci"
        assert os.path.exists(host.p(by[vf]["vfio_device"]))
    assert first["isolation"]["viable"] is True
    assert restore.UDEV_RULES in first["persisted_files"]
    kernel.writes.clear()
    second = run(lab, args)
    assert second["changed"] is False and not kernel.writes


def test_check_mode_predicts_and_changes_nothing(lab):
    host, kernel = lab
    result = run(lab, {"devices": ["0000:82:00.0"]}, check_mode=True, diff=True)
    assert result["changed"] and result["devices"][0]["driver_after"] == "vfio-pci"
    assert '"driver": "pci-stub"' in result["diff"][0]["before"] and '"driver": "vfio-pci"' in result["diff"][0]["after"]
    assert not kernel.writes and kernel.driver("0000:82:00.0") == "pci-stub"
    assert not os.path.exists(host.p(restore.VFIO_CONFIG))


@pytest.mark.parametrize("address, reason", [
    ("0000:00:05.0", "its netdev eth0 carries a default route"),
    ("0000:00:06.0", "block device vda holds the mounted filesystem /"),
])
def test_host_devices_refused_nothing_changed(lab, address, reason):
    host, kernel = lab
    result = run(lab, {"devices": [address]})
    assert result["failed"] and address in result["msg"] and reason in result["msg"] and "force: true" in result["msg"]
    assert not kernel.writes and not os.path.exists(host.p(restore.VFIO_CONFIG))


def test_hand_back_removes_persisted_binding(lab):
    host, _kernel = lab
    run(lab, {"devices": ["0000:82:00.0"]})
    result = run(lab, {"devices": ["0000:82:00.0"], "driver": "host"})
    assert result["changed"] and result["devices"][0]["driver_after"] == "pci-stub"
    assert "0000:82:00.0" not in open(host.p(restore.UDEV_RULES), encoding="utf-8").read()
    assert not os.path.exists(host.p(restore.MODULES_LOAD))


def test_requires_a_selector(lab):
    result = run(lab, {})
    assert result["failed"] and "one of the following is required" in result["msg"]


def test_ssh_nic_named_from_the_session_in_the_tree(lab):
    result = run(lab, {"devices": ["0000:00:05.0"]})
    assert result["failed"] and "carries the current SSH connection (local address 192.0.2.2)" in result["msg"]


def test_vf_held_as_a_hostdev_interface_by_a_stopped_domain_is_in_use(lab):
    host, kernel = lab
    run(lab, {"vfs_of": [PF]})
    host.write("/etc/libvirt/qemu/tenant-net.xml", domain_xml("tenant-net", "0000:81:00.2"))
    kernel.writes.clear()
    result = run(lab, {"devices": ["0000:81:00.2"], "driver": "host"})
    assert result["failed"] and "0000:81:00.2 is in use by a tenant (attached to libvirt domain tenant-net)" in result["msg"]
    assert result["changed"] is False and not kernel.writes and kernel.driver("0000:81:00.2") == "vfio-pci"


def test_root_option_previews_a_captured_tree(tmp_path):
    tree, kernel = lab_host(tmp_path / "root")
    result = run_module(vfio_bind.main, {"root": tree.root, "devices": ["0000:82:00.0"]}, check_mode=True)
    assert result["changed"] and result["devices"][0]["driver_after"] == "vfio-pci"
    assert kernel.driver("0000:82:00.0") == "pci-stub" and not os.path.exists(tree.p(restore.VFIO_CONFIG))


def test_handing_back_a_device_whose_default_is_the_stub_is_idempotent(lab):
    """0000:82:00.0 is bound to pci-stub with no driver_override: pci-stub is its host default
    (as pci-stub.ids= makes it), so driver: host has nothing to do, run after run."""
    _host, kernel = lab
    for _run in range(2):
        result = run(lab, {"devices": ["0000:82:00.0"], "driver": "host", "persist": False})
        assert result["changed"] is False and not result.get("failed"), result
    assert kernel.writes == [] and kernel.driver("0000:82:00.0") == "pci-stub"


def test_handing_back_after_a_run_stopped_before_the_probe_probes_again(lab):
    """Bound to vfio-pci, then a hand-back stopped after the unbind and the override was cleared:
    no driver, no override. The next run is not done: it probes, and the stub takes it again."""
    host, kernel = lab
    run(lab, {"devices": ["0000:82:00.0"]})
    kernel.write("/sys/bus/pci/devices/0000:82:00.0/driver/unbind", "0000:82:00.0")
    kernel.write("/sys/bus/pci/devices/0000:82:00.0/driver_override", "\n")
    assert kernel.driver("0000:82:00.0") is None
    result = run(lab, {"devices": ["0000:82:00.0"], "driver": "host"})
    assert result["changed"] is True and kernel.driver("0000:82:00.0") == "pci-stub", result
    assert run(lab, {"devices": ["0000:82:00.0"], "driver": "host"})["changed"] is False
    assert not os.path.exists(host.p("/dev/vfio/7"))


# ---- the VFs first, in the same call (sriov): the SR-IOV/VFIO stage in one round trip

@pytest.fixture
def bare(tmp_path):
    """The lab layout before the SR-IOV stage: the PF has no VFs."""
    return lab_host(tmp_path / "root", ssh_local="192.0.2.2")


STAGE = {"devices": ["0000:82:00.0"], "vfs_of": [PF], "sriov": {"pfs": [{"pf": PF, "num_vfs": 4, "autoprobe": False}]}}


def test_vfs_created_and_bound_in_one_call_then_nothing_to_do(bare):
    _host, kernel = bare
    first = run(bare, STAGE)
    assert first["changed"] and not first.get("failed")
    assert first["sriov"]["pfs"][0]["num_vfs"] == 4 and first["vfs_to_come"] == []
    by = {d["address"]: d["driver_after"] for d in first["devices"]}
    assert by == dict([("0000:82:00.0", "vfio-pci")] + [("0000:81:00.%d" % i, "vfio-pci") for i in range(1, 5)])
    kernel.writes.clear()
    second = run(bare, STAGE)
    assert second["changed"] is False and second["sriov"]["changed"] is False and not kernel.writes


def test_check_mode_on_a_bare_pf_binds_what_exists_and_names_the_vfs_to_come(bare):
    _host, kernel = bare
    result = run(bare, STAGE, check_mode=True)
    assert result["changed"] and result["vfs_to_come"] == [PF] and not kernel.writes
    assert [d["address"] for d in result["devices"]] == ["0000:82:00.0"]
    assert result["sriov"]["pfs"][0]["recreated"] is True


@pytest.mark.parametrize("args, words", [
    (dict(STAGE, devices=["0000:00:05.0"]), ["SSH connection"]),
    (dict(STAGE, devices=["0000:99:00.0"]), ["devices: no PCI device 0000:99:00.0"]),
    (dict(STAGE, vfs_of=["0000:99:00.0"]), ["vfs_of: no PCI device"]),
    (dict(STAGE, sriov={"pfs": [{"pf": PF, "num_vfs": 9}]}), ["num_vfs: 9 is outside 0-4"]),
    (dict(STAGE, sriov={"pfs": [{"pf": PF}], "colour": 1}), ["sriov:", "colour", "gpuvirt.tenancy.sriov_vfs"]),
])
def test_bad_input_creates_no_vf(bare, args, words):
    _host, kernel = bare
    result = run(bare, args)
    assert result["failed"] and not result.get("changed")
    for word in words:
        assert word in result["msg"]
    assert not [w for w in kernel.writes if w[0].endswith("sriov_numvfs")]


def test_sriov_alone_binds_nothing(bare):
    result = run(bare, {"sriov": {"pf": PF, "num_vfs": 2, "autoprobe": False}})
    assert result["changed"] and result["devices"] == [] and result["sriov"]["num_vfs"] == 2


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_gpu_with_no_iommu_group_is_refused_before_any_unbind(lab, check_mode):
    """Without a group vfio-pci cannot take the device: the unbind would leave it driverless.
    Refused in check mode too (the plan is the run's), naming the device and the fix."""
    tree, kernel = lab
    tree.add_pci("0000:84:00.0", "0x10de", "0x2330", "0x030200", parent="0000:80:02.0", numa_node=1, driver="nvidia")
    result = run(lab, {"devices": ["0000:84:00.0", "0000:82:00.0"]}, check_mode=check_mode)
    assert result["failed"] and not result["changed"], result
    assert result["msg"].startswith("0000:84:00.0: no IOMMU group") and "pci-stub" in result["msg"]
    assert not kernel.writes and kernel.driver("0000:82:00.0") == "pci-stub"
    assert os.readlink(tree.p(tree.pci_paths["0000:84:00.0"] + "/driver")).endswith("/nvidia")
    # pci-stub needs no group
    stub = run(lab, {"devices": ["0000:84:00.0"], "driver": "pci-stub", "persist": False}, check_mode=True)
    assert stub["changed"] and not stub.get("failed"), stub


# ---- the stage's desired state (sriov_pfs, gpus): the SR-IOV/VFIO stage decided on the host

NIC_VFS = ["0000:84:10.0", "0000:84:10.2"]
# as the inventory gives them: gpuvirt_sriov_pfs (a netdev name for the igb PF; link_type is the
# boot stage's), gpuvirt_gpus, gpuvirt_gpu_pci_ids
INPUTS = {
    "sriov_pfs": [{"pf": PF, "num_vfs": 4}, {"pf": "ens12", "num_vfs": 2, "link_type": "eth"}],
    "gpus": ["0000:82:00.0"],
    "gpu_ids": ["1234:11e8"],
    "devices": [],
}
# the same VFs with explicit per-VF settings by address (sriov_vfs's options, as a user gives them)
EXPLICIT = {
    "sriov": {"pfs": [{"pf": PF, "num_vfs": 4}, {"pf": "ens12", "num_vfs": 2}],
              "vf_settings": [{"address": NIC_VFS[0], "mac": "52:54:00:a0:00:01", "vlan": 101, "spoofchk": True, "trust": False},
                              {"address": NIC_VFS[1], "mac": "52:54:00:b0:00:01", "vlan": 102, "spoofchk": True, "trust": False}]},
    "vfs_of": [PF, "ens12"],
    "gpus": ["0000:82:00.0"],
    "gpu_ids": ["1234:11e8"],
    "devices": [],
}


@pytest.fixture
def nic(tmp_path, monkeypatch):
    """The bare lab layout with the igb PF and the GPU's audio function (fakes.kernel.lab_host_with_nic),
    ``ip`` the stand-in (VF settings kept in a state file)."""
    tree, kernel = lab_host_with_nic(tmp_path / "root")
    monkeypatch.setenv("GPUVIRT_FAKE_IP_STATE", str(tmp_path / "ip.json"))
    monkeypatch.setenv("GPUVIRT_FAKE_ROOT", tree.root)
    return tree, kernel


def stage(nic, args, **kwargs):
    """vfio_bind on the tree, ``ip`` answered by its stand-in; -> (result, the ip calls)."""
    tree, kernel = nic
    commands = RecordedCommands(replies=[standin_reply("ip")])
    # the running host's: under a capture ip is not asked (test_capture_reads_no_vf_settings)
    result = run_module(vfio_bind.main, args, host=LiveHost(tree.root, commands=commands, kernel=kernel), **kwargs)
    return result, commands.calls


def test_the_stage_from_its_desired_state_then_nothing_to_do(nic):
    tree, kernel = nic
    first, calls = stage(nic, INPUTS)
    assert first["changed"] and not first.get("failed"), first
    # VFs made on both PFs; no VF setting (the tenants stage gives the tenants' VFs theirs)
    assert [(p["pf"], p["num_vfs"]) for p in first["sriov"]["pfs"]] == [(PF, 4), (NIC_PF, 2)]
    assert not [c for c in calls if c[:3] == ["ip", "link", "set"]], calls
    # read again after the VFs: every VF, the GPU and its audio function (its IOMMU group's) on vfio-pci
    assert first["companions"] == [GPU_AUDIO] and first["vfs_to_come"] == []
    bound = ["0000:81:00.%d" % i for i in range(1, 5)] + ["0000:82:00.0", GPU_AUDIO] + NIC_VFS
    assert sorted(d["address"] for d in first["devices"]) == sorted(bound)
    assert all(kernel.driver(address) == "vfio-pci" for address in bound)
    assert kernel.driver(NIC_PF) == "igb" and kernel.driver("0000:00:05.0") == "e1000e"
    config = json.load(open(tree.p(restore.SRIOV_CONFIG), encoding="utf-8"))["pfs"]
    assert not config[NIC_PF].get("vfs") and config[PF] == {"num_vfs": 4, "autoprobe": False}
    kernel.writes.clear()
    second, calls = stage(nic, INPUTS)
    assert second["changed"] is False and not kernel.writes, second
    assert all(call[:3] == ["ip", "link", "show"] or call[:4] == ["ip", "-j", "addr", "show"] for call in calls), calls


def test_explicit_vf_settings_by_address_then_nothing_to_do(nic):
    """A user's own per-VF settings (the sriov option: sriov_vfs's pfs and vf_settings) are set in the same call, through
    the ip stand-in, kept at boot, and hold on a second run."""
    tree, kernel = nic
    first, calls = stage(nic, EXPLICIT)
    assert first["changed"] and not first.get("failed"), first
    assert ["ip", "link", "set", "dev", "ens12", "vf", "0", "mac", "52:54:00:a0:00:01", "vlan", "101",
            "spoofchk", "on", "trust", "off"] in calls
    assert ["ip", "link", "set", "dev", "ens12", "vf", "1", "mac", "52:54:00:b0:00:01", "vlan", "102",
            "spoofchk", "on", "trust", "off"] in calls
    assert all(kernel.driver(address) == "vfio-pci" for address in NIC_VFS)
    config = json.load(open(tree.p(restore.SRIOV_CONFIG), encoding="utf-8"))["pfs"]
    assert [vf["vlan"] for vf in config[NIC_PF]["vfs"]] == [101, 102]
    kernel.writes.clear()
    second, calls = stage(nic, EXPLICIT)
    assert second["changed"] is False and not kernel.writes, second
    # only reads: the VFs' settings, and the SSH session's netdev (ip -j addr show) on the running host
    assert all(call[:3] == ["ip", "link", "show"] or call[:4] == ["ip", "-j", "addr", "show"] for call in calls), calls


def test_capture_reads_no_vf_settings(nic):
    """Under a captured tree (root other than /, a preview) no program answers for the host: ip is not asked (the
    controller's would read the controller's network, or fail on a netdev it lacks), the PF says its VFs' settings
    were not read and every one asked is shown as to be set; outside check mode the settings are refused, before any change."""
    tree, kernel = nic
    stage(nic, INPUTS)
    kernel.writes.clear()
    commands = RecordedCommands(programs=["ip"])
    preview = run_module(vfio_bind.main, dict(EXPLICIT), check_mode=True, diff=True, host=Host(tree.root, commands=commands, kernel=kernel))
    assert not preview.get("failed") and commands.calls == [], preview
    nic_pf = preview["sriov"]["pfs"][1]
    assert nic_pf["pf"] == NIC_PF and not nic_pf["recreated"] and "not read" in nic_pf["settings_not_read"]
    assert preview["sriov"]["pfs"][0]["settings_not_read"] is None   # no netdev: nothing to read
    assert [vf["settings"]["vlan"] for vf in nic_pf["vfs"]] == [101, 102] and preview["changed"]
    refused = run_module(vfio_bind.main, dict(EXPLICIT), host=Host(tree.root, commands=commands, kernel=kernel))
    assert refused["failed"] and not refused["changed"] and commands.calls == [], refused
    assert "VF settings of ens12" in refused["msg"] and "captured tree" in refused["msg"] and "check mode" in refused["msg"]
    assert not kernel.writes


@pytest.fixture
def no_acs(tmp_path):
    """The DGX A100-class host (fakes.servers) with GPU0 and NIC0, a ConnectX SR-IOV PF, in one IOMMU group, as a
    top-level PCIe switch without ACS above both leaves them."""
    tree, gpus, nics = build_dgx_a100_class(str(tmp_path / "root"))
    gpu, nic = gpus["GPU0"], nics["NIC0"]

    def group_of(address):
        return int(os.path.basename(os.readlink(tree.p(tree.pci_paths[address] + "/iommu_group"))))
    shutil.rmtree(tree.p("/sys/kernel/iommu_groups/%d" % group_of(nic)))
    tree.set_iommu_group(nic, group_of(gpu))
    for name in ("sriov_offset", "sriov_stride"):
        tree.write(tree.pci_paths[nic] + "/" + name, "1")
    return tree, FakeKernel(tree), gpu, nic


@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize("group_policy", ["strict", "bind_group"])
def test_a_gpu_sharing_its_group_with_a_pf_of_the_call_is_refused(no_acs, group_policy, check_mode):
    """The PF whose VFs the call makes is the host's (vfio-pci on it would remove them): its group's GPU goes to no
    tenant, as the planner leaves it out; bind_group does not take the PF, nor does the refusal suggest it."""
    tree, kernel, gpu, nic = no_acs
    pfs = [{"pf": nic, "num_vfs": 2}]
    for args, words in (({"sriov_pfs": pfs, "devices": [gpu]}, "%s, which the host keeps (an SR-IOV PF whose VFs this call" % nic),
                        ({"sriov_pfs": pfs, "gpus": [gpu], "gpu_ids": ["10de:20b0"]},
                         "GPU %s left out: its IOMMU group" % gpu)):
        result = run_module(vfio_bind.main, dict(args, group_policy=group_policy), check_mode=check_mode,
                            host=Host(tree.root, commands=RecordedCommands(), kernel=kernel))
        assert result["failed"] and not result["changed"], result
        assert words in result["msg"] and "enable ACS" in result["msg"] and "bind_group" not in result["msg"], result["msg"]
        assert not kernel.writes and kernel.driver(nic) == "mlx5_core" and kernel.driver(gpu) == "nvidia"


def test_the_stage_in_check_mode_names_the_vfs_to_come_and_changes_nothing(nic):
    tree, kernel = nic
    result, calls = stage(nic, INPUTS, check_mode=True, diff=True)
    assert result["changed"] and not result.get("failed"), result
    assert result["vfs_to_come"] == [PF, NIC_PF]
    assert sorted(d["address"] for d in result["devices"]) == ["0000:82:00.0", GPU_AUDIO]
    assert [p["recreated"] for p in result["sriov"]["pfs"]] == [True, True]
    assert [vf["address"] for vf in result["sriov"]["pfs"][1]["vfs"]] == NIC_VFS
    assert not kernel.writes and not [c for c in calls if c[:3] == ["ip", "link", "set"]]
    assert not os.path.exists(tree.p(restore.SRIOV_CONFIG)) and not os.path.exists(tree.p(restore.VFIO_CONFIG))


def test_a_pf_without_vfs_is_not_bound_and_its_vfs_are_removed(nic):
    _tree, kernel = nic
    stage(nic, INPUTS)
    result, _calls = stage(nic, dict(INPUTS, sriov_pfs=[{"pf": PF, "num_vfs": 0}, {"pf": "ens12", "num_vfs": 2}]))
    assert result["changed"] and [p["num_vfs"] for p in result["sriov"]["pfs"]] == [0, 2]
    assert not [d for d in result["devices"] if d["address"].startswith("0000:81:")]
    assert kernel.read("/sys/bus/pci/devices/%s/sriov_numvfs" % PF) == "0"


def test_the_autoprobe_of_a_pf_wins_over_the_calls(nic):
    result, _calls = stage(nic, dict(INPUTS, autoprobe=True,
                                     sriov_pfs=[{"pf": PF, "num_vfs": 2, "autoprobe": False}, {"pf": "ens12", "num_vfs": 1}]))
    assert [p["autoprobe"] for p in result["sriov"]["pfs"]] == [False, True]


@pytest.mark.parametrize("args, words", [
    # a PF entry without its count, a VF count that is not a number
    (dict(INPUTS, sriov_pfs=[{"pf": PF}]), ["missing required arguments: num_vfs", "sriov_pfs"]),
    (dict(INPUTS, sriov_pfs=[{"pf": PF, "num_vfs": "four"}]), ["sriov_pfs", "num_vfs"]),
    (dict(INPUTS, sriov_pfs=[{"pf": PF, "num_vfs": 4, "colour": "red"}]), ["colour", "sriov_pfs"]),
    (dict(INPUTS, sriov_pfs=[{"pf": PF, "num_vfs": -1}]), ["sriov_pfs[0] (0000:81:00.0): num_vfs: -1 is outside 0-4"]),
    (dict(INPUTS, sriov_pfs=[{"pf": "ens12", "num_vfs": 9}]), ["sriov_pfs[0] (ens12): num_vfs: 9 is outside 0-7"]),
    (dict(INPUTS, sriov_pfs=[{"pf": PF, "num_vfs": 4}, {"pf": "81:00.0", "num_vfs": 2}]),
     ["sriov_pfs[1] (81:00.0): PF 0000:81:00.0 is also sriov_pfs[0]"]),
    (dict(INPUTS, sriov_pfs=[{"pf": "0000:82:00.0", "num_vfs": 4}]),
     ["sriov_pfs[0] (0000:82:00.0): pf: 0000:82:00.0 is not SR-IOV capable"]),
    (dict(INPUTS, sriov_pfs=[{"pf": "eth9", "num_vfs": 4}]), ["sriov_pfs[0] (eth9): pf: 'eth9' is neither"]),
    # tenant GPUs: a GPU of the host model only
    (dict(INPUTS, gpu_ids=[]), ["gpus: 0000:82:00.0 (1234:11e8) is not a GPU of the host model", "gpu_ids"]),
    (dict(INPUTS, gpus=["0000:99:00.0"]), ["gpus: no PCI device 0000:99:00.0"]),
    (dict(INPUTS, gpus=["gpu0"]), ["gpus: 'gpu0' is not a PCI address"]),
    (dict(INPUTS, gpu_ids=["1234"]), ["gpu_ids:"]),
    # the stage's options or the controller's sriov, not both
    (dict(INPUTS, sriov={"pf": PF, "num_vfs": 4}), ["mutually exclusive", "sriov", "sriov_pfs"]),
    # the tenants are no option: the tenants stage gives their VFs their settings
    (dict(INPUTS, tenants=[{"name": "tenant-a", "vfs": [NIC_VFS[0]], "vlan": 101}]), ["Unsupported parameters", "tenants"]),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_bad_stage_input_is_refused_naming_it_and_changes_nothing(nic, args, words, check_mode):
    tree, kernel = nic
    before = tree_state(tree.root)
    result, calls = stage(nic, args, check_mode=check_mode)
    assert result["failed"] and not result.get("changed"), result
    for word in words:
        assert word in result["msg"], result["msg"]
    assert not kernel.writes and not [c for c in calls if c[:3] == ["ip", "link", "set"]]
    assert tree_state(tree.root) == before
