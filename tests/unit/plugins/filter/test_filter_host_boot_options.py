# -*- coding: utf-8 -*-
"""host_boot_options: the role's inputs mapped to the boot stage's one iommu_grub call, parts
left out when not asked for, and the options validated by iommu_grub's own argument spec."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.host_boot_options import INPUTS, FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub import IOMMU_GRUB_ARGS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import nested_params

FILTERS = FilterModule().filters()
ROLE_DEFAULTS = {
    "iommu": True, "vendor": "auto", "passthrough": True, "pre_bind_ids": ["10de:20b0"], "pre_bind_driver": "pci-stub",
    "args": [], "grub_file": "/etc/default/grub", "variable": "GRUB_CMDLINE_LINUX", "bootloader_update": "auto",
    "tenant_gpus": None, "host_gpus": [], "gpu_ids": [], "nic_ids": [], "gpu_host_stack": True, "early_driver": True,
    "early_driver_before": ["nouveau", "nvidia", "nvidiafb"], "early_driver_initramfs": True,
    "sriov_pfs": [{"pf": "0000:0c:00.0", "num_vfs": 8, "link_type": "eth"}], "firmware_sriov": True,
    "firmware_install": True, "firmware_reset": True, "firmware_reset_level": 3, "reboot_ok": False,
    "hugepages": [{"size": "1G", "count": 4, "node": 1}], "hugepages_at_boot": ["1G"], "hugepages_persist": True,
    "hugepages_unit": "gpuvirt-hugepages.service", "hugepages_mounts": [],
}


def test_every_part_maps_and_validates_as_iommu_grub_does():
    assert sorted(ROLE_DEFAULTS) == sorted(INPUTS)
    options = FILTERS["host_boot_options"](ROLE_DEFAULTS)
    assert options["gpu_stack"]["tenant_gpus"] == [] and options["gpu_stack"]["initramfs"] is True
    assert options["firmware"]["sriov_pfs"] == ROLE_DEFAULTS["sriov_pfs"] and options["firmware"]["reset_ok"] is False
    assert options["hugepages"]["persist_unit"] == "/etc/systemd/system/gpuvirt-hugepages.service"
    validated = nested_params("boot", "gpuvirt.tenancy.iommu_grub", IOMMU_GRUB_ARGS, options)
    assert validated["firmware"]["reset_level"] == 3


def test_parts_not_asked_for_are_left_out():
    options = FILTERS["host_boot_options"](dict(ROLE_DEFAULTS, sriov_pfs=[], hugepages=[]))
    assert "firmware" not in options and "hugepages" not in options
    assert "firmware" not in FILTERS["host_boot_options"](dict(ROLE_DEFAULTS, firmware_sriov=False))


@pytest.mark.parametrize("value, message", [
    (["x"], "expected a dict of the host_boot inputs, got list"),
    ({"iommu": True}, "inputs vendor, passthrough"),
])
def test_bad_inputs_are_named(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["host_boot_options"](value)
