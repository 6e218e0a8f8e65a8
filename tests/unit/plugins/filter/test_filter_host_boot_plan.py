# -*- coding: utf-8 -*-
"""The boot stage's decisions as the role host_boot asks for them (filters over what the role
read): on the real lab capture with the lab inventory they are no-ops; on an 8-GPU host model
the whole NVIDIA stack is planned; registered-loop shapes of mlx_rocev2 and command results."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.host_boot_plan import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.topology import read_topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FILTERS = FilterModule().filters()
LAB_CAPTURE = os.path.join(REPO, "tests", "fixtures", "lab", "bare")


def lab_inventory():
    with open(os.path.join(REPO, "inventories", "lab", "group_vars", "all", "gpuvirt.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def lab_settings():
    """The role's __host_boot_settings with the lab inventory's values (defaults/main.yml)."""
    inv = lab_inventory()
    return {"tenant_gpus": inv.get("gpuvirt_gpus"), "host_gpus": inv.get("gpuvirt_host_gpus", []),
            "pre_bind_ids": inv["gpuvirt_gpu_pci_ids"], "pre_bind_driver": "pci-stub", "manage_gpu_stack": True,
            "sriov_pfs": inv["gpuvirt_sriov_pfs"], "firmware": True}


def test_the_lab_plans_nothing_new():
    """The lab has no ConnectX and no NVIDIA GPU: no firmware step, no blacklist, the same ids and args."""
    inv = lab_inventory()
    topo = read_topology(LAB_CAPTURE, gpu_ids=inv["gpuvirt_gpu_pci_ids"], nic_ids=inv["gpuvirt_nic_pci_ids"])
    # The capture is of the lab before its PCIe switch (edu at 0000:82:00.0, no ivshmem): its
    # GPU stand-ins are the tenants' GPUs there, as gpuvirt_gpus names them in today's lab.
    settings = dict(lab_settings(), tenant_gpus=[gpu["address"] for gpu in topo["gpus"]])
    plan = FILTERS["host_boot_plan"](topo, settings)
    assert plan["firmware_targets"] == []
    stack = plan["gpu_stack"]
    assert not stack["active"] and stack["kernel_args"] == [] and stack["address_prebind"] == []
    assert stack["pre_bind_ids"] == inv["gpuvirt_gpu_pci_ids"] and stack["notes"] == []


def test_an_eight_gpu_host_with_connectx():
    topo = {"gpus": [{"address": "0000:%02x:00.0" % b, "vendor_id": "0x10de", "device_id": "0x20b2"} for b in (7, 15)],
            "cmdline": [], "netdevs": {},
            "pci_devices": {"0000:0c:00.0": {"vendor_id": "0x15b3", "class": "0x020000", "physfn": None, "is_bridge": False}}}
    plan = FILTERS["host_boot_plan"](topo, {"pre_bind_ids": ["10de:20b2"], "sriov_pfs": [{"pf": "0c:00.0", "num_vfs": 8}],
                                            "os_family": "RedHat"})
    assert plan["firmware_targets"] == [{"pf": "0000:0c:00.0", "num_vfs": 8}]
    assert plan["gpu_stack"]["active"] and [a["name"] for a in plan["gpu_stack"]["kernel_args"]] == [
        "modprobe.blacklist", "rd.driver.blacklist"]
    with pytest.raises(AnsibleFilterError, match="not a GPU of this host"):
        FILTERS["host_boot_plan"](topo, {"host_gpus": ["0000:99:00.0"]})
    assert FILTERS["host_boot_plan"](topo, {"firmware": False})["firmware_targets"] == []


def test_firmware_steps_over_registered_loops():
    read = {"results": [{"item": {"pf": "0000:0c:00.0", "num_vfs": 8}, "changed": False,
                         "firmware": {"SRIOV_EN": {"default": "False(0)", "current": "False(0)", "next": "False(0)"},
                                      "NUM_OF_VFS": {"default": "0", "current": "0", "next": "0"},
                                      "LINK_TYPE_P1": {"default": "IB(1)", "current": "IB(1)", "next": "IB(1)"}}},
                        {"item": {"pf": "0000:0d:00.0", "num_vfs": 2}, "skipped": True}]}
    assert FILTERS["host_boot_firmware_settings"](read) == [
        {"pf": "0000:0c:00.0", "firmware": {"SRIOV_EN": True, "NUM_OF_VFS": 8, "LINK_TYPE_P1": "ETH"}}]
    assert FILTERS["host_boot_firmware_settings"]({"skipped": True, "results": []}) == []
    set_loop = {"results": [{"item": {"pf": "0000:0c:00.0"}, "pending_parameters": ["NUM_OF_VFS", "SRIOV_EN"]}]}
    before = FILTERS["host_boot_firmware_outcome"](set_loop, None, None, "/usr/bin/mstfwreset", True)
    assert before["reset_devices"] == ["0000:0c:00.0"] and before["cold_boot"] == []
    reset_loop = {"results": [{"item": "0000:0c:00.0", "rc": 0}]}
    after_loop = {"results": [{"item": "0000:0c:00.0", "pending_parameters": ["NUM_OF_VFS", "SRIOV_EN"]}]}
    after = FILTERS["host_boot_firmware_outcome"](set_loop, reset_loop, after_loop, "/usr/bin/mstfwreset", True)
    assert after["cold_boot"] == ["0000:0c:00.0"] and "COLD BOOT" in after["messages"][0]
    loaded = {"results": [{"item": "0000:0c:00.0", "pending_parameters": []}]}
    assert FILTERS["host_boot_firmware_outcome"](set_loop, reset_loop, loaded, "/usr/bin/mstfwreset")["pending"] == []
    # nothing set (the lab: the task was skipped by an empty loop)
    assert FILTERS["host_boot_firmware_outcome"]({"results": []})["pending"] == []


def test_tools_services_and_initramfs():
    assert FILTERS["host_boot_firmware_tools"](["/usr/bin/mstconfig", "/usr/bin/mstfwreset"])["reset"] == "/usr/bin/mstfwreset"
    assert FILTERS["host_boot_firmware_tools"]("")["config"] is None
    stack = {"active": True, "services": ["nvidia-persistenced", "nvidia-fabricmanager"]}
    assert FILTERS["host_boot_services"]({"nvidia-fabricmanager.service": {}}, stack) == ["nvidia-fabricmanager.service"]
    assert FILTERS["host_boot_services"](None, {}) == []
    files = [{"path": "/etc/modprobe.d/gpuvirt-nvidia-host.conf", "in_image": True, "result": {"changed": True}}]
    assert FILTERS["host_boot_initramfs"]("x/pci-stub.ko\n", None, files) == ["/etc/modprobe.d/gpuvirt-nvidia-host.conf changed"]
