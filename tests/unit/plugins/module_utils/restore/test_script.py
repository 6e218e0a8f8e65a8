# -*- coding: utf-8 -*-
"""The boot-time restore script (restore/script.py SCRIPT) over the lab host's tree, its sysfs
writes going to the kernel stand-in (fakes.kernel.FakeKernel, a stand-in: the lab proves the
real kernel agrees). The script takes the tree as an argument; nothing is patched."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.restore import script as restore

from fakes.kernel import lab_host  # pylint: disable=import-error
from fakes.unit_checks import systemd_verify  # pylint: disable=import-error

PF = "0000:81:00.0"
NUMVFS = "/sys/bus/pci/devices/%s/sriov_numvfs" % PF
AUTOPROBE = "/sys/bus/pci/devices/%s/sriov_drivers_autoprobe" % PF


@pytest.fixture
def script():
    """The script's functions, as the installed file defines them."""
    namespace = {"__name__": "gpuvirt_boot"}
    exec(compile(restore.SCRIPT, restore.SCRIPT_PATH, "exec"), namespace)  # pylint: disable=exec-used
    return namespace


@pytest.fixture
def lab(tmp_path, script):
    host, kernel = lab_host(tmp_path)
    return host, kernel, script["Tree"](host.root, writer=kernel.write)


def test_sriov_recreates_vfs_through_zero(lab, script):
    host, kernel, tree = lab
    kernel.write(NUMVFS, "2")
    host.write(restore.SRIOV_CONFIG, '{"pfs": {"%s": {"num_vfs": 4, "autoprobe": false}}}' % PF)
    kernel.writes.clear()
    assert script["restore_sriov"](tree, 0) == 0
    # the kernel refuses a new count while VFs exist: through zero
    assert kernel.writes == [(AUTOPROBE, "0"), (NUMVFS, "0"), (NUMVFS, "4")]
    assert kernel.read(NUMVFS) == "4"


def test_sriov_brings_the_pf_up_before_its_vf_settings(lab, script, capsys):
    host, kernel, tree = lab
    host.add_netdev(PF, "ens12")
    host.write(restore.SRIOV_CONFIG, '{"pfs": {"%s": {"num_vfs": 2, "link_up": true, "vfs": [{"index": 0, "vlan": 101}]}}}' % PF)
    assert script["restore_sriov"](tree, 0) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "would run" in line]
    # the link first: libvirt starts no domain holding a VF of a PF that is down
    assert lines == ["gpuvirt: would run: ip link set dev ens12 up", "gpuvirt: would run: ip link set dev ens12 vf 0 vlan 101"]


def test_sriov_missing_pf_is_a_failure(lab, script):
    host, kernel, tree = lab
    host.write(restore.SRIOV_CONFIG, '{"pfs": {"0000:99:00.0": {"num_vfs": 2}}}')
    assert script["restore_sriov"](tree, 0) == 1
    assert kernel.writes == []


def test_vfio_binds_and_a_missing_device_costs_one_shared_wait(lab, script):
    host, kernel, tree = lab
    host.write(restore.VFIO_CONFIG, '{"devices": {"0000:81:00.3": {"driver": "vfio-pci", "vfs_of": "0000:81:00.0"},'
                                    ' "0000:81:00.4": {"driver": "vfio-pci", "vfs_of": "0000:81:00.0"},'
                                    ' "0000:82:00.0": {"driver": "vfio-pci"}}}')
    started = time.time()
    assert script["restore_vfio"](tree, 1) == 0
    assert time.time() - started < 1.9
    assert kernel.driver("0000:82:00.0") == "vfio-pci"
    assert ("/sys/bus/pci/devices/0000:82:00.0/driver_override", "vfio-pci") in kernel.writes


def test_tree_reads_and_writes_under_its_root(tmp_path, script):
    tree = script["Tree"](str(tmp_path))
    (tmp_path / "etc").mkdir()
    tree.write("/etc/value", "1\n")
    assert tree.read("/etc/value") == "1" and tree.read("/etc/missing") is None
    assert not tree.live and script["Tree"]().live


def test_compiles_standalone_and_prints_usage(tmp_path):
    path = tmp_path / "gpuvirt-sriov-vfio"
    path.write_text(restore.SCRIPT)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage" in done.stderr
    done = subprocess.run([sys.executable, str(path), "vfio", "--root", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "cannot read /etc/gpuvirt/vfio.json" in done.stdout


def test_units_run_the_script_before_libvirt():
    for text, mode in ((restore.SRIOV_UNIT_TEXT, "sriov"), (restore.VFIO_UNIT_TEXT, "vfio")):
        assert "ExecStart=/usr/bin/python3 %s %s\n" % (restore.SCRIPT_PATH, mode) in text
        assert "Before=" in text and "libvirtd.service" in text


@pytest.mark.parametrize("text, lines", [
    (restore.SRIOV_UNIT_TEXT, ["# Installed by the gpuvirt.tenancy collection (sriov_vfs, persist: true).",
                               "Description=gpuvirt: recreate SR-IOV VFs and their settings",
                               "After=systemd-udev-settle.service systemd-modules-load.service",
                               "Before=gpuvirt-vfio.service libvirtd.service virtqemud.service"]),
    (restore.VFIO_UNIT_TEXT, ["# Installed by the gpuvirt.tenancy collection (vfio_bind, persist: true).",
                              "Description=gpuvirt: bind devices to vfio-pci (driver_override)",
                              "After=systemd-udev-settle.service systemd-modules-load.service gpuvirt-sriov.service",
                              "Before=libvirtd.service virtqemud.service"]),
])
def test_each_unit_names_its_module_and_its_order(text, lines):
    # the SR-IOV unit recreates the VFs before the vfio unit binds them, both before libvirt
    assert [line for line in text.splitlines() if line.startswith(("#", "Description=", "After=", "Before="))] == lines


@pytest.mark.parametrize("name, text", [(restore.SRIOV_UNIT, restore.SRIOV_UNIT_TEXT), (restore.VFIO_UNIT, restore.VFIO_UNIT_TEXT)])
def test_the_boot_units_pass_systemd_analyze_verify(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    rc, output = systemd_verify([str(tmp_path / name)])
    assert rc == 0 and not output.strip(), output
