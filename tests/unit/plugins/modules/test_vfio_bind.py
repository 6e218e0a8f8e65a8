# -*- coding: utf-8 -*-
"""vfio_bind end to end over the lab layout (fakes.kernel.lab_host), sysfs writes going to
the FakeKernel stand-in."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils import boot_script as boot
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import host_usage
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import vfio
from ansible_collections.gpuvirt.tenancy.plugins.modules import vfio_bind
from conftest import run_module  # pylint: disable=import-error
from fakes.kernel import lab_host  # pylint: disable=import-error

PF = "0000:81:00.0"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    host, kernel = lab_host(tmp_path / "root")
    kernel.write("/sys/bus/pci/devices/%s/sriov_drivers_autoprobe" % PF, "0")
    kernel.write("/sys/bus/pci/devices/%s/sriov_numvfs" % PF, "4")
    kernel.writes.clear()
    monkeypatch.setattr(vfio, "ROOT", host.root)
    monkeypatch.setattr(vfio, "WRITER", kernel)
    # The SSH session of the run: its local end is the management NIC's address.
    real_init = host_usage.HostUsage.__init__

    def init(self, root="/", ssh_connection=None, ip_addr_json=None, pid=None):
        real_init(self, root, ssh_connection="192.0.2.1 51000 192.0.2.2 22", ip_addr_json=ip_addr_json, pid=pid)
    monkeypatch.setattr(host_usage.HostUsage, "__init__", init)
    return host, kernel


def test_bind_gpu_and_vfs_then_nothing_to_do(lab):
    host, kernel = lab
    args = {"devices": ["0000:82:00.0"], "vfs_of": [PF]}
    first = run_module(vfio_bind.main, args)
    assert first["changed"] and not first.get("failed")
    by = {d["address"]: d for d in first["devices"]}
    assert (by["0000:82:00.0"]["driver_before"], by["0000:82:00.0"]["driver_after"]) == ("pci-stub", "vfio-pci")
    for vf in ("0000:81:00.1", "0000:81:00.2", "0000:81:00.3", "0000:81:00.4"):
        assert by[vf]["driver_before"] is None and by[vf]["driver_after"] == "vfio-pci"
        assert os.path.exists(host.p(by[vf]["vfio_device"]))
    assert first["isolation"]["viable"] is True
    assert boot.UDEV_RULES in first["persisted_files"]
    kernel.writes.clear()
    second = run_module(vfio_bind.main, args)
    assert second["changed"] is False and not kernel.writes


def test_check_mode_predicts_and_changes_nothing(lab):
    host, kernel = lab
    result = run_module(vfio_bind.main, {"devices": ["0000:82:00.0"]}, check_mode=True, diff=True)
    assert result["changed"] and result["devices"][0]["driver_after"] == "vfio-pci"
    assert '"driver": "pci-stub"' in result["diff"][0]["before"] and '"driver": "vfio-pci"' in result["diff"][0]["after"]
    assert not kernel.writes and kernel.driver("0000:82:00.0") == "pci-stub"
    assert not os.path.exists(host.p(boot.VFIO_CONFIG))


@pytest.mark.parametrize("address, reason", [
    ("0000:00:05.0", "its netdev eth0 carries a default route"),
    ("0000:00:06.0", "block device vda holds the mounted filesystem /"),
])
def test_host_devices_refused_nothing_changed(lab, address, reason):
    host, kernel = lab
    result = run_module(vfio_bind.main, {"devices": [address]})
    assert result["failed"] and address in result["msg"] and reason in result["msg"] and "force: true" in result["msg"]
    assert not kernel.writes and not os.path.exists(host.p(boot.VFIO_CONFIG))


def test_hand_back_removes_persisted_binding(lab):
    host, _kernel = lab
    run_module(vfio_bind.main, {"devices": ["0000:82:00.0"]})
    result = run_module(vfio_bind.main, {"devices": ["0000:82:00.0"], "driver": "host"})
    assert result["changed"] and result["devices"][0]["driver_after"] == "pci-stub"
    assert "0000:82:00.0" not in open(host.p(boot.UDEV_RULES), encoding="utf-8").read()
    assert not os.path.exists(host.p(boot.MODULES_LOAD))


def test_requires_a_selector(lab):
    result = run_module(vfio_bind.main, {})
    assert result["failed"] and "one of the following is required" in result["msg"]
