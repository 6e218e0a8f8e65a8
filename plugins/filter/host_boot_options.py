# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``host_boot_options``: the boot stage's one M(iommu_grub) call, built from the role's inputs
(the stage's desired state as the inventory says it). Everything that depends on the host (the
GPU host stack, the pre-binding ids, the firmware targets, the initramfs) is decided by the
module on the host; this only maps inputs to options and leaves unset parts out."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

__metaclass__ = type

INPUTS = ("iommu", "vendor", "passthrough", "pre_bind_ids", "pre_bind_driver", "args", "grub_file", "variable",
          "bootloader_update", "tenant_gpus", "host_gpus", "gpu_ids", "nic_ids", "gpu_host_stack", "early_driver",
          "early_driver_before", "early_driver_initramfs", "sriov_pfs", "firmware_sriov", "firmware_install",
          "firmware_reset", "firmware_reset_level", "reboot_ok", "hugepages", "hugepages_at_boot", "hugepages_persist",
          "hugepages_unit", "hugepages_mounts")


def host_boot_options(inputs):
    """The options of the boot stage's iommu_grub call for ``inputs`` (the role's ``host_boot_*``
    inputs without the prefix)."""
    if not isinstance(inputs, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_options: expected a dict of the host_boot inputs, got %s"
                                 % type(inputs).__name__)
    missing = [k for k in INPUTS if k not in inputs]
    if missing:
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_options: inputs %s missing" % ", ".join(missing))
    options = dict((k, inputs[k]) for k in ("iommu", "vendor", "passthrough", "pre_bind_ids", "pre_bind_driver", "args",
                                            "grub_file", "variable", "bootloader_update"))
    options["gpu_stack"] = {
        "tenant_gpus": list(inputs["tenant_gpus"] or []), "host_gpus": list(inputs["host_gpus"] or []),
        "gpu_ids": list(inputs["gpu_ids"] or []), "manage": bool(inputs["gpu_host_stack"]),
        "early_driver": bool(inputs["early_driver"]), "early_driver_before": list(inputs["early_driver_before"] or []),
        "initramfs": bool(inputs["early_driver_initramfs"]),
    }
    if inputs["firmware_sriov"] and inputs["sriov_pfs"]:
        options["firmware"] = {
            "sriov_pfs": list(inputs["sriov_pfs"]), "nic_ids": list(inputs["nic_ids"] or []),
            "install": bool(inputs["firmware_install"]), "reset": bool(inputs["firmware_reset"]),
            "reset_level": int(inputs["firmware_reset_level"]), "reset_ok": bool(inputs["reboot_ok"]),
        }
    if inputs["hugepages"] or inputs["hugepages_mounts"]:
        options["hugepages"] = {
            "pages": list(inputs["hugepages"] or []), "at_boot": list(inputs["hugepages_at_boot"] or []),
            "persist": bool(inputs["hugepages_persist"]),
            "persist_unit": "/etc/systemd/system/%s" % inputs["hugepages_unit"],
            "mounts": list(inputs["hugepages_mounts"] or []), "enable_units": True,
        }
    return options


class FilterModule:
    """Boot stage filter."""

    def filters(self):
        return {"host_boot_options": host_boot_options}
