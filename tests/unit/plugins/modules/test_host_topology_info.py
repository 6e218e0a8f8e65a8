# -*- coding: utf-8 -*-
"""host_topology_info as Ansible runs it: arguments, result shape, errors."""

from __future__ import annotations

import os

from ansible_collections.gpuvirt.tenancy.plugins.modules import host_topology_info

from conftest import run_module  # pylint: disable=import-error
from fakes.host_tree import FakeHost  # pylint: disable=import-error


def test_reads_a_captured_tree(tmp_path):
    host = FakeHost(tmp_path)
    host.add_numa_node(0, [0, 1], memory_mb=2048)
    host.add_numa_node(1, [2, 3], memory_mb=2048, hugepages={"2048kB": (64, 60)})
    host.add_pci("0000:82:00.0", "0x1234", "0x11e8", "0x00ff00", root_bus="pci0000:80", numa_node=1)
    result = run_module(host_topology_info.main, {"root": str(tmp_path), "gpu_ids": ["1234:11e8"]}, check_mode=True)
    assert result["changed"] is False
    topo = result["topology"]
    assert [n["id"] for n in topo["numa_nodes"]] == [0, 1]
    assert topo["numa_nodes"][1]["hugepages"]["2048kB"] == {"total": 64, "free": 60, "supported": True}
    assert topo["gpus"][0]["address"] == "0000:82:00.0" and topo["gpus"][0]["numa_node"] == 1
    assert topo["cmdline"][0] == "BOOT_IMAGE=/vmlinuz"


def test_bad_id_fails_naming_input(tmp_path):
    result = run_module(host_topology_info.main, {"root": str(tmp_path), "nic_ids": ["zzzz:1"]})
    assert result["failed"] and "nic_ids" in result["msg"] and "zzzz:1" in result["msg"]


def test_reads_this_machine():
    """The real kernel this runs on: whatever it has, the model must be consistent."""
    result = run_module(host_topology_info.main, {})
    topo = result["topology"]
    assert topo["cpus"] and topo["numa_nodes"]
    assert set(c["id"] for c in topo["cpus"]) >= set(c for n in topo["numa_nodes"] for c in n["cpus"])
    for address, dev in topo["pci_devices"].items():
        assert dev["address"] == address and dev["vendor_id"].startswith("0x")
        assert os.path.exists("/sys/bus/pci/devices/" + address)
    with open("/proc/cmdline", encoding="utf-8") as handle:
        assert " ".join(topo["cmdline"]) == handle.read().strip()


def test_runs_on_an_injected_host(tmp_path):
    """The one host seam: a Host over a temporary tree, nothing patched."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host  # pylint: disable=import-outside-toplevel
    from fakes.commands import RecordedCommands  # pylint: disable=import-error,import-outside-toplevel
    tree = FakeHost(tmp_path)
    tree.add_numa_node(0, [0, 1], memory_mb=1024)
    result = run_module(host_topology_info.main, {}, host=Host(str(tmp_path), commands=RecordedCommands()))
    assert [n["id"] for n in result["topology"]["numa_nodes"]] == [0]


def test_root_that_is_not_a_directory_is_an_error(tmp_path):
    missing = str(tmp_path / "nowhere")
    result = run_module(host_topology_info.main, {"root": missing})
    assert result["failed"] and missing in result["msg"] and result["changed"] is False
