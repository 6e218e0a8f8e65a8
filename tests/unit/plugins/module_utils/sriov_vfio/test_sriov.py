# -*- coding: utf-8 -*-
"""sriov: VF count through 0, refusal while VFs are in use, settings validation,
persistence. Writes go to the FakeKernel stand-in (tests/unit/fakes/kernel.py),
which answers EBUSY like the kernel does."""

from __future__ import annotations

import errno
import os

import pytest
from hypothesis import given, strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import sriov
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore.files import BootFiles
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.device_use import isolation
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.vfio import VfioBinder
from fakes.commands import RecordedCommands  # pylint: disable=import-error
from fakes.kernel import cx4lx_no_acs_host, lab_host  # pylint: disable=import-error

PF = "0000:81:00.0"
NUMVFS = "/sys/bus/pci/devices/%s/sriov_numvfs" % PF


def host_over(tree, kernel):
    """A Host over the tree: writes to the kernel stand-in, no program installed."""
    return Host(tree.root, commands=RecordedCommands(), kernel=kernel)


def manager(host, kernel):
    return sriov.SriovManager(host_over(host, kernel), read_topology(host.root))


def converge(host, kernel, count=4, autoprobe=False, **kwargs):
    m = manager(host, kernel)
    plan = m.plan(PF, num_vfs=count, autoprobe=autoprobe, **kwargs)
    run = Run()
    m.apply(plan, run)
    assert run.changed is bool(kernel.writes)
    return plan


def test_fake_kernel_refuses_direct_change_like_the_kernel(tmp_path):
    host, kernel = lab_host(tmp_path)
    kernel.write(NUMVFS, "4")
    with pytest.raises(OSError) as err:
        kernel.write(NUMVFS, "2")
    assert err.value.errno == errno.EBUSY


def test_create_four_driverless_vfs_each_in_own_group(tmp_path):
    host, kernel = lab_host(tmp_path)
    plan = converge(host, kernel)
    assert plan["recreate"] and plan["num_vfs_before"] == 0
    topo = read_topology(host.root)
    vfs = topo["pci_devices"][PF]["virtfns"]
    assert vfs == ["0000:81:00.1", "0000:81:00.2", "0000:81:00.3", "0000:81:00.4"]
    assert [topo["pci_devices"][v]["driver"] for v in vfs] == [None] * 4
    assert len({topo["pci_devices"][v]["iommu_group"] for v in vfs}) == 4
    assert list(kernel.writes) == [
        ("/sys/bus/pci/devices/%s/sriov_drivers_autoprobe" % PF, "0"), (NUMVFS, "4")]
    report = manager(host, kernel).report_vfs(topo, plan)
    assert [(r["index"], r["address"], r["numa_node"]) for r in report] == [(i, v, 1) for i, v in enumerate(vfs)]
    assert isolation(topo, vfs)["viable"] is True


def test_autoprobe_true_lets_the_host_driver_take_vfs(tmp_path):
    host, kernel = lab_host(tmp_path)
    converge(host, kernel, count=2, autoprobe=True)
    assert kernel.driver("0000:81:00.1") == "nvme"


def test_four_to_two_goes_through_zero(tmp_path):
    host, kernel = lab_host(tmp_path)
    converge(host, kernel)
    kernel.writes.clear()
    plan = converge(host, kernel, count=2)
    assert plan["num_vfs_before"] == 4 and plan["num_vfs_after"] == 2
    assert kernel.writes == [(NUMVFS, "0"), (NUMVFS, "2")]
    assert read_topology(host.root)["pci_devices"][PF]["virtfns"] == ["0000:81:00.1", "0000:81:00.2"]
    m = manager(host, kernel)
    assert not m.changed(m.plan(PF, num_vfs=2, autoprobe=False))


def bind_vfs(host, kernel):
    b = VfioBinder(host_over(host, kernel), read_topology(host.root), {})
    b.apply(b.plan(b.select(vfs_of=[PF])), "vfio-pci", Run())


def test_refused_while_a_vf_is_held_open(tmp_path):
    host, kernel = lab_host(tmp_path)
    converge(host, kernel)
    bind_vfs(host, kernel)
    group = read_topology(host.root)["pci_devices"]["0000:81:00.3"]["iommu_group"]
    host.write("/proc/777/status", "Name:\tqemu-system-x86\nPPid:\t1\n")
    os.makedirs(host.p("/proc/777/fd"))
    os.symlink(host.p("/dev/vfio/%d" % group), host.p("/proc/777/fd/31"))
    kernel.writes.clear()
    with pytest.raises(StateError) as err:
        converge(host, kernel, count=2)
    text = str(err.value)
    assert "0000:81:00.3" in text and "/dev/vfio/%d is held open by pid 777" % group in text
    assert "Nothing was changed" in text and "force: true" in text
    assert not kernel.writes
    assert len(read_topology(host.root)["pci_devices"][PF]["virtfns"]) == 4
    plan = converge(host, kernel, count=2, force=True)
    assert "0000:81:00.3" in plan["forced_in_use"]


def test_refused_while_a_libvirt_domain_uses_a_vf(tmp_path):
    host, kernel = lab_host(tmp_path)
    converge(host, kernel)
    host.write("/run/libvirt/qemu/tenant-b.xml",
               "<domstatus><domain type='qemu'><name>tenant-b</name><devices><hostdev mode='subsystem' type='pci'>"
               "<source><address domain='0x0000' bus='0x81' slot='0x00' function='0x2'/></source></hostdev>"
               "</devices></domain></domstatus>")
    with pytest.raises(StateError, match="VF 0000:81:00.2: attached to libvirt domain tenant-b"):
        converge(host, kernel, count=0)


@pytest.mark.parametrize("pf, kwargs, message", [
    (PF, {"num_vfs": 5}, "num_vfs: 5 is outside 0-4"),
    ("0000:82:00.0", {"num_vfs": 1}, "pf: 0000:82:00.0 is not SR-IOV capable"),
    ("0000:00:99.0", {"num_vfs": 1}, "pf: no PCI device 0000:00:99.0"),
    ("eth9", {"num_vfs": 1}, "neither a PCI address"),
    (PF, {"num_vfs": 2, "vfs": [{"index": 0, "mac": "52:54:00:00:00:01"}]}, "PF 0000:81:00.0 has no netdev"),
])
def test_input_errors_change_nothing(tmp_path, pf, kwargs, message):
    host, kernel = lab_host(tmp_path)
    with pytest.raises(InputError, match=message):
        manager(host, kernel).plan(pf, **kwargs)
    assert not kernel.writes


@pytest.mark.parametrize("entry, message", [
    ({"index": 4}, "VF 4 does not exist with num_vfs 4"),
    ({"index": 0, "mac": "52:54:00:00:01"}, "is not a MAC address"),
    ({"index": 0, "mac": "01:00:5e:00:00:01"}, "multicast"),
    ({"index": 0, "vlan": 4096}, r"vfs\[0\].vlan: 4096 is not a VLAN id"),
    ({"index": 0, "vlan": 4095}, r"vfs\[0\].vlan: 4095 is not a VLAN id"),
    ({"index": 0, "vlan": -1}, "not a VLAN id"),
    ({"index": 0, "mac": "00:00:00:00:00:00"}, "all-zero address"),
    ({"index": 0, "mac": "FF:FF:FF:FF:FF:FF"}, "broadcast"),
    ({"index": 0, "mac": "52:54:00:00:00:01\n"}, "is not a MAC address"),
    ({"index": 0, "clear": True, "mac": "52:54:00:00:00:01"}, r"vfs\[0\].clear: clears the VF's MAC and VLAN"),
    ({"index": 0, "qos": 3}, "needs a VLAN"),
    ({"index": 0, "link_state": "up"}, "link_state"),
])
def test_vf_setting_errors(entry, message):
    with pytest.raises(InputError, match=message):
        sriov.normalize_vf_settings([entry], 4)


def test_vf_of_a_pf_is_not_a_pf(tmp_path):
    host, kernel = cx4lx_no_acs_host(tmp_path)
    with pytest.raises(InputError, match="is itself a VF of 0000:01:00.0"):
        manager(host, kernel).plan("0000:01:00.3", num_vfs=1)


@given(st.integers(0, 0xff), st.integers(0, 0x1f), st.integers(0, 7), st.integers(1, 64), st.integers(1, 8),
       st.integers(1, 16))
def test_vf_addresses_follow_routing_ids(bus, slot, function, offset, stride, count):
    pf = "0000:%02x:%02x.%x" % (bus, slot, function)
    pf_rid = bus << 8 | slot << 3 | function
    addresses = [sriov.vf_address(pf, offset, stride, i) for i in range(count)]
    rids = []
    for address in addresses:
        _d, vbus, rest = address.split(":")
        vslot, vfn = rest.split(".")
        rids.append(int(vbus, 16) << 8 | int(vslot, 16) << 3 | int(vfn))
    expected = [(pf_rid + offset + i * stride) & 0xffff for i in range(count)]
    assert rids == expected
    assert len(set(addresses)) == len(addresses)


def test_persist_writes_config_unit_and_is_idempotent(tmp_path):
    host, kernel = lab_host(tmp_path)
    m = manager(host, kernel)
    plan = m.plan(PF, num_vfs=4, autoprobe=False)
    files = BootFiles(m.host)
    changes = m.persist_changes(plan, files)
    assert [c[0] for c in changes] == [restore.SRIOV_CONFIG, restore.SCRIPT_PATH, restore.UNIT_DIR + "/" + restore.SRIOV_UNIT]
    files.apply(changes, enable_unit=restore.SRIOV_UNIT)
    unit = open(host.p(restore.UNIT_DIR + "/" + restore.SRIOV_UNIT), encoding="utf-8").read()
    for line in ("WantedBy=multi-user.target", "Before=gpuvirt-vfio.service libvirtd.service", "Type=oneshot"):
        assert line in unit
    assert os.access(host.p(restore.SCRIPT_PATH), os.X_OK)
    assert not m.persist_changes(plan, files)


def test_boot_script_recreates_vfs_through_zero(tmp_path):
    host, kernel = lab_host(tmp_path)
    converge(host, kernel, count=2, autoprobe=True)
    host.write(restore.SRIOV_CONFIG, '{"pfs": {"%s": {"num_vfs": 4, "autoprobe": false}}}' % PF)
    namespace = {"__name__": "gpuvirt_boot"}
    exec(compile(restore.SCRIPT, restore.SCRIPT_PATH, "exec"), namespace)  # pylint: disable=exec-used
    tree = namespace["Tree"](host.root, writer=kernel.write)
    kernel.writes.clear()
    assert namespace["restore_sriov"](tree, 0) == 0
    assert kernel.writes == [("/sys/bus/pci/devices/%s/sriov_drivers_autoprobe" % PF, "0"), (NUMVFS, "0"), (NUMVFS, "4")]
    vfs = read_topology(host.root)["pci_devices"][PF]["virtfns"]
    assert len(vfs) == 4 and all(kernel.driver(v) is None for v in vfs)
