# -*- coding: utf-8 -*-
"""vfio: selection, host-needed refusal, IOMMU-group rules and isolation over fake trees
built from real listings (tests/fixtures/iommu, tests/fixtures/pci) and the lab layout.
Writes go to the FakeKernel stand-in (tests/unit/fakes/kernel.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import device_use
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import vfio
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.host_usage import HostUsage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, lab_host, rtx_group_host, v100_pairs_host  # pylint: disable=import-error
from fakes.unit_checks import udevadm_verify  # pylint: disable=import-error

SSH = "192.0.2.1 51000 192.0.2.2 22"


def binder(host, kernel, needed=None):
    """A binder over the tree: sysfs writes to the kernel stand-in, no program installed."""
    topo = read_topology(host.root)
    if needed is None:
        needed = HostUsage(host.root, ssh_connection=SSH).report()
    return vfio.VfioBinder(Host(host.root, commands=RecordedCommands(), kernel=kernel), topo, needed)


# ---------------------------------------------------------------- group policy
def test_strict_allows_driverless_group_peer(tmp_path):
    host, kernel = v100_pairs_host(tmp_path)
    b = binder(host, kernel, needed={})
    plans = b.plan(["0000:27:00.0"])
    assert [p["address"] for p in plans] == ["0000:27:00.0"]
    b.apply(plans, "vfio-pci", Run())
    assert kernel.driver("0000:27:00.0") == "vfio-pci" and kernel.driver("0000:28:00.0") is None


def test_strict_refuses_group_peer_on_host_driver_and_bind_group_takes_it(tmp_path):
    host, kernel = v100_pairs_host(tmp_path, driver_on={"0000:28:00.0": "nouveau"})
    b = binder(host, kernel, needed={})
    with pytest.raises(StateError) as err:
        b.plan(["0000:27:00.0"])
    assert "0000:28:00.0" in str(err.value) and "nouveau" in str(err.value) and "bind_group" in str(err.value)
    assert not kernel.writes
    plans = b.plan(["0000:27:00.0"], group_policy="bind_group")
    assert [(p["address"], p["group_added"]) for p in plans] == [("0000:27:00.0", False), ("0000:28:00.0", True)]
    b.apply(plans, "vfio-pci", Run())
    assert kernel.driver("0000:28:00.0") == "vfio-pci"


def test_bridge_in_group_is_left_alone(tmp_path):
    host, kernel = rtx_group_host(tmp_path)
    b = binder(host, kernel, needed={})
    with pytest.raises(StateError, match="0000:01:00.1.*snd_hda_intel"):
        b.plan(["0000:01:00.0"])
    plans = b.plan(["0000:01:00.0"], group_policy="bind_group")
    assert [p["address"] for p in plans] == ["0000:01:00.0", "0000:01:00.1"]   # not the root port 00:01.0
    b.apply(plans, "vfio-pci", Run())
    assert kernel.driver("0000:00:01.0") == "pcieport"
    assert kernel.driver("0000:01:00.1") == "vfio-pci"


# ---------------------------------------------------------------- host-needed refusal
@pytest.mark.parametrize("address, words", [
    ("0000:00:05.0", ["0000:00:05.0", "eth0", "default route", "SSH connection", "force: true"]),
    ("0000:00:06.0", ["0000:00:06.0", "vda", "mounted filesystem /", "boot disk controller", "force: true"]),
])
def test_refuses_devices_the_host_needs(tmp_path, address, words):
    host, kernel = lab_host(tmp_path)
    b = binder(host, kernel)
    with pytest.raises(StateError) as err:
        b.plan([address])
    for word in words:
        assert word in str(err.value)
    assert not kernel.writes
    assert b.plan([address], force=True)[0]["driver_after"] == "vfio-pci"


def test_bind_group_still_refuses_host_needed_peer(tmp_path):
    host, kernel = v100_pairs_host(tmp_path, driver_on={"0000:28:00.0": "nouveau"})
    b = binder(host, kernel, needed={"0000:28:00.0": ["it drives the console"]})
    with pytest.raises(StateError, match=r"0000:28:00.0, which the host keeps \(it drives the console\)"):
        b.plan(["0000:27:00.0"], group_policy="bind_group")


@pytest.mark.parametrize("group_policy", ["strict", "bind_group"])
def test_a_pf_kept_for_its_vfs_is_never_taken_with_its_group(tmp_path, group_policy):
    """The ConnectX-4 Lx host: PF 01:00.0 shares group 1 with its VFs. A PF whose VFs go to tenants keeps its host driver
    (another driver removes its VFs): taking its VFs would take it too, so the call is refused with the planner's fix
    (ACS, another slot, the device kept for the host), never with bind_group, not even with force."""
    host, kernel = cx4lx_no_acs_host(tmp_path)
    topo = read_topology(host.root)
    kept = device_use.pfs_kept_for_vfs(Sysfs(host.root), topo, ["0000:01:00.0"])
    b = vfio.VfioBinder(Host(host.root, commands=RecordedCommands(), kernel=kernel), topo, {}, kept)
    for force in (False, True):
        with pytest.raises(StateError) as err:
            b.plan(topo["pci_devices"]["0000:01:00.0"]["virtfns"], group_policy=group_policy, force=force)
        message = str(err.value)
        assert "0000:01:00.0, which the host keeps (an SR-IOV PF whose VFs this call makes or binds for tenants" in message
        assert "enable ACS" in message and "own IOMMU group" in message and "bind_group" not in message
    with pytest.raises(StateError, match="refusing to take 0000:01:00.0: an SR-IOV PF"):
        b.plan(["0000:01:00.0"], force=True)
    assert not kernel.writes and kernel.driver("0000:01:00.0") == "mlx5_core"


def test_iommu_off_names_boot_arg(tmp_path):
    host, kernel = lab_host(tmp_path)
    for address in list(host.pci_paths):
        os.unlink(host.p(host.pci_paths[address] + "/iommu_group"))
    import shutil
    shutil.rmtree(host.p("/sys/kernel/iommu_groups"))
    b = binder(host, kernel)
    with pytest.raises(StateError, match="intel_iommu=on"):
        b.plan(["0000:82:00.0"])
    assert b.plan(["0000:82:00.0"], driver="pci-stub")[0]["rebind"] is False   # pci-stub needs no IOMMU


# ---------------------------------------------------------------- selection
@pytest.mark.parametrize("kwargs, message", [
    ({"devices": ["82:00"]}, "devices: '82:00' is not a PCI address"),
    ({"devices": ["0000:99:00.0"]}, "no PCI device 0000:99:00.0"),
    ({"ids": ["10de:2330"]}, "no PCI device with id 10de:2330"),
    ({"ids": ["nvidia"]}, "not a vendor:device id"),
    ({"vfs_of": ["0000:81:00.0"]}, "has no VFs; create them first"),
    ({"vfs_of": ["nosuchnic"]}, "neither a PCI address nor the netdev"),
    ({}, "name at least one device"),
])
def test_selection_errors(tmp_path, kwargs, message):
    host, kernel = lab_host(tmp_path)
    with pytest.raises(InputError, match=message):
        binder(host, kernel).select(**kwargs)


def test_select_by_id_short_address_and_netdev_pf(tmp_path):
    host, kernel = cx4lx_no_acs_host(tmp_path)
    b = binder(host, kernel, needed={})
    assert b.select(ids=["15b3:1015"]) == ["0000:01:00.0", "0000:01:00.1"]
    assert b.select(devices=["01:00.2"]) == ["0000:01:00.2"]
    assert b.select(vfs_of=["enp1s0f0np0"]) == ["0000:01:00.2", "0000:01:00.3", "0000:01:00.4", "0000:01:00.5"]


# ---------------------------------------------------------------- in use
def hold_open(host, pid, group):
    host.write("/proc/%d/status" % pid, "Name:\tqemu\nPPid:\t1\n")
    fd_dir = host.p("/proc/%d/fd" % pid)
    os.makedirs(fd_dir, exist_ok=True)
    os.symlink(host.p("/dev/vfio/%s" % group), os.path.join(fd_dir, "23"))


def test_handing_back_a_device_held_open_is_refused(tmp_path):
    host, kernel = lab_host(tmp_path)
    b = binder(host, kernel)
    b.apply(b.plan(["0000:82:00.0"]), "vfio-pci", Run())
    hold_open(host, 4242, 7)
    assert device_use.vfio_group_holders(Sysfs(host.root), 7) == [4242]
    b = binder(host, kernel)
    kernel.writes.clear()
    with pytest.raises(StateError, match="/dev/vfio/7 is held open by pid 4242"):
        b.plan(["0000:82:00.0"], driver="host")
    assert not kernel.writes


# ---------------------------------------------------------------- binding and persistence
def test_pci_stub_handover_and_idempotence(tmp_path):
    host, kernel = lab_host(tmp_path)
    b = binder(host, kernel)
    plans = b.plan(["0000:82:00.0"])
    assert (plans[0]["driver_before"], plans[0]["driver_after"], plans[0]["vfio_device"]) == ("pci-stub", "vfio-pci", "/dev/vfio/7")
    b.apply(plans, "vfio-pci", Run())
    assert ("/sys/bus/pci/devices/0000:82:00.0/driver/unbind", "0000:82:00.0") in kernel.writes
    assert ("/sys/bus/pci/drivers_probe", "0000:82:00.0") in kernel.writes
    assert not any("new_id" in path for path, _v in kernel.writes)
    assert os.path.exists(host.p("/dev/vfio/7"))
    again = binder(host, kernel)
    assert not again.changed(again.plan(["0000:82:00.0"]))
    back = binder(host, kernel)
    back.apply(back.plan(["0000:82:00.0"], driver="host"), "host", Run())
    assert kernel.driver("0000:82:00.0") == "pci-stub"


def test_persist_files_and_boot_script_restore(tmp_path):
    host, kernel = lab_host(tmp_path)
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_drivers_autoprobe", "0")
    kernel.write("/sys/bus/pci/devices/0000:81:00.0/sriov_numvfs", "4")
    b = binder(host, kernel)
    selected = b.select(devices=["0000:82:00.0"], vfs_of=["0000:81:00.0"])
    plans = b.plan(selected)
    files = BootFiles(b.host)
    changes = b.persist_changes(plans, "vfio-pci", files)
    files.apply(changes, enable_unit=restore.VFIO_UNIT)
    rules = open(host.p(restore.UDEV_RULES), encoding="utf-8").read()
    assert 'ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:82:00.0", ATTR{driver_override}="vfio-pci"' in rules
    assert rules.count("ATTR{driver_override}") == 5
    rc, output = udevadm_verify(rules)
    assert rc == 0, output
    assert open(host.p(restore.MODULES_LOAD), encoding="utf-8").read().splitlines()[-1] == "vfio-pci"
    assert os.readlink(host.p(restore.WANTS_DIR + "/" + restore.VFIO_UNIT)) == restore.UNIT_DIR + "/" + restore.VFIO_UNIT
    assert "Before=libvirtd.service" in open(host.p(restore.UNIT_DIR + "/" + restore.VFIO_UNIT), encoding="utf-8").read()
    assert not b.persist_changes(plans, "vfio-pci", files)            # second run: nothing to write
    # "Reboot": the boot script, with its sysfs writes going to the kernel stand-in.
    namespace = {"__name__": "gpuvirt_boot"}
    exec(compile(restore.SCRIPT, restore.SCRIPT_PATH, "exec"), namespace)  # pylint: disable=exec-used
    tree = namespace["Tree"](host.root, writer=kernel.write)
    assert namespace["restore_vfio"](tree, 0) == 0
    for address in selected:
        assert kernel.driver(address) == "vfio-pci"


def test_boot_script_compiles_standalone_and_prints_usage(tmp_path):
    script = tmp_path / "gpuvirt-sriov-vfio"
    script.write_text(restore.SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage" in done.stderr
    done = subprocess.run([sys.executable, str(script), "vfio", "--root", str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "cannot read /etc/gpuvirt/vfio.json" in done.stdout


def test_boot_script_missing_device_costs_one_shared_wait(tmp_path):
    import time
    host, kernel = lab_host(tmp_path)
    host.write(restore.VFIO_CONFIG, '{"devices": {"0000:81:00.3": {"driver": "vfio-pci", "vfs_of": "0000:81:00.0"},'
                                    ' "0000:81:00.4": {"driver": "vfio-pci", "vfs_of": "0000:81:00.0"},'
                                    ' "0000:82:00.0": {"driver": "vfio-pci"}}}')
    namespace = {"__name__": "gpuvirt_boot"}
    exec(compile(restore.SCRIPT, restore.SCRIPT_PATH, "exec"), namespace)  # pylint: disable=exec-used
    tree = namespace["Tree"](host.root, writer=kernel.write)
    started = time.time()
    assert namespace["restore_vfio"](tree, 1) == 0
    assert time.time() - started < 1.9
    assert kernel.driver("0000:82:00.0") == "vfio-pci"
