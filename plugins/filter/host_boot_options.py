# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``host_boot_options``: the boot stage's one M(iommu_grub) call, built from the role's inputs
(the stage's desired state as the inventory says it). Everything that depends on the host (the
GPU host stack, the pre-binding ids, the firmware targets, the initramfs) is decided by the
module on the host; this only maps inputs to options and leaves unset parts out."""

from __future__ import absolute_import, division, print_function

import base64

from ansible.errors import AnsibleFilterError

__metaclass__ = type

INPUTS = ("iommu", "vendor", "passthrough", "pre_bind_ids", "pre_bind_driver", "args", "grub_file", "variable",
          "bootloader_update", "tenant_gpus", "host_gpus", "gpu_ids", "nic_ids", "gpu_host_stack", "early_driver",
          "early_driver_before", "early_driver_initramfs", "sriov_pfs", "firmware_sriov", "firmware_install",
          "firmware_reset", "firmware_reset_level", "firmware_ats", "acs", "reboot_ok", "hugepages", "hugepages_at_boot", "hugepages_persist",
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
        ats = ats_pfs(inputs["firmware_ats"], inputs["sriov_pfs"])
        if ats:
            options["firmware"]["ats_pfs"] = ats
    acs = acs_options(inputs["acs"], inputs)
    if acs is not None:
        options["acs"] = acs
    if inputs["hugepages"] or inputs["hugepages_mounts"]:
        options["hugepages"] = {
            "pages": list(inputs["hugepages"] or []), "at_boot": list(inputs["hugepages_at_boot"] or []),
            "persist": bool(inputs["hugepages_persist"]),
            "persist_unit": "/etc/systemd/system/%s" % inputs["hugepages_unit"],
            "mounts": list(inputs["hugepages_mounts"] or []), "enable_units": True,
        }
    return options


def ats_pfs(wanted, sriov_pfs):
    """The PFs to get ATS in their firmware (iommu_grub firmware.ats_pfs) from ``host_boot_firmware_ats``:
    false (none, the default), true (every PF of ``sriov_pfs``: their VFs go to the tenants), or a
    list of those PFs (the ones whose VFs go to GPU tenants)."""
    if wanted is None or wanted is False:
        return []
    listed = [item.get("pf") for item in sriov_pfs or [] if isinstance(item, dict)]
    if wanted is True:
        return [str(pf) for pf in listed if pf]
    if not isinstance(wanted, (list, tuple)) or not all(isinstance(pf, str) and pf for pf in wanted):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_options: host_boot_firmware_ats must be true, false or a list of "
                                 "PFs of gpuvirt_sriov_pfs whose VFs go to GPU tenants, got %r" % (wanted,))
    return list(wanted)


def acs_options(wanted, inputs):
    """iommu_grub's ``acs`` from ``host_boot_acs``: false (the default: none), true, or ``{flags}``;
    the tenants' GPUs (``host_boot_tenant_gpus``, else the module's) and the PFs whose VFs go to
    them (those of ``host_boot_firmware_ats`` when it lists them, else every PF of sriov_pfs)."""
    if wanted is None or wanted is False:
        return None
    if wanted is not True and not (isinstance(wanted, dict) and set(wanted) <= {"flags"}):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_options: host_boot_acs must be true, false or {flags: "
                                 "<config_acs flags>}, got %r" % (wanted,))
    ats = inputs["firmware_ats"]
    pfs = list(ats) if isinstance(ats, (list, tuple)) else ats_pfs(True, inputs["sriov_pfs"])
    options = {"gpus": list(inputs["tenant_gpus"] or []), "pfs": pfs}
    if isinstance(wanted, dict) and wanted.get("flags") is not None:
        options["flags"] = str(wanted["flags"])
    return options


def _slurped(read, what):
    """The text of an ``ansible.builtin.slurp`` result."""
    if not isinstance(read, dict) or "content" not in read:
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_reboot_proof: %s must be an ansible.builtin.slurp result, got %r"
                                 % (what, read))
    return base64.b64decode(read["content"]).decode("utf-8", "replace")


def host_boot_reboot_proof(before, after, result):
    """Whether the boot stage's reboot is proven, from the slurp of the boot id before it
    (``before``), the looped slurp of the boot id and ``/proc/cmdline`` after it (``after``) and
    the stage's result (``args_missing``, ``args_unwanted``): ``{ok, problems, message}``. A new
    boot id, every wanted argument on the new command line as written, no unwanted one."""
    reads = (after or {}).get("results") if isinstance(after, dict) else None
    if not isinstance(reads, list) or len(reads) != 2:
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_reboot_proof: the reads after the reboot are a looped "
                                 "slurp of the boot id and /proc/cmdline, got %r" % (after,))
    if not isinstance(result, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_reboot_proof: the stage's result must be a dict, got %r" % (result,))
    old_id = _slurped(before, "the boot id read before").strip()
    new_id = _slurped(reads[0], "the boot id read after").strip()
    cmdline = _slurped(reads[1], "/proc/cmdline").split()
    missing = [arg for arg in result.get("args_missing") or [] if arg not in cmdline]
    unwanted = [arg for arg in result.get("args_unwanted") or [] if arg in cmdline]
    problems = []
    if not old_id:
        problems.append("no boot id was read before the reboot")
    elif new_id == old_id:
        problems.append("the boot id is still %s: the host did not boot again" % old_id)
    if missing:
        problems.append("the new command line lacks %s" % " ".join(missing))
    if unwanted:
        problems.append("the new command line still has %s" % " ".join(unwanted))
    message = "boot id %s -> %s; the kernel runs with %s" % (old_id or "?", new_id or "?", " ".join(cmdline))
    if problems:
        message += "; " + "; ".join(problems) + " (is the edited boot entry the default one? docs/boot.md)"
    return {"ok": not problems, "problems": problems, "message": message}


def host_boot_unsettled(after):
    """What the boot stage's check after the reboot (``iommu_grub`` in check mode) still finds
    to do: a reboot still required, hugepage pools to change, or pools not allocated as requested
    (the kernel found too little contiguous memory). Empty when the new kernel is as wanted."""
    if not isinstance(after, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_unsettled: expected the iommu_grub result, got %r" % (after,))
    problems = []
    if after.get("failed"):
        problems.append("the check failed: %s" % after.get("msg", ""))
    if after.get("reboot_required"):
        problems.append("a reboot is still required: %s" % "; ".join(after.get("pending") or []))
    hugepages = after.get("hugepages") or {}
    if hugepages.get("changed"):
        problems.append("the hugepage pools would still change")
    for pool in hugepages.get("pages") or []:
        if pool.get("allocated") != pool.get("requested"):
            problems.append("%s pages on node %s: %s allocated of %s requested" % (
                pool.get("size"), pool.get("node"), pool.get("allocated"), pool.get("requested")))
    return problems


def host_boot_notes(result):
    """What the boot stage's ``iommu_grub`` result says beyond its changes, one line each: what
    the ConnectX firmware still needs, what the GPU host stack decided, and a cold boot the
    firmware needs (a power cycle, not a reboot). Empty when there is nothing to say."""
    if result is None:
        return []
    if not isinstance(result, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.host_boot_notes: expected the iommu_grub result, got %s" % type(result).__name__)
    firmware = result.get("firmware") or {}
    stack = result.get("gpu_stack") or {}
    lines = (list(firmware.get("messages") or []) + list(stack.get("notes") or [])
             + list((result.get("acs") or {}).get("notes") or []))
    if stack.get("daemons_stopped"):
        # the run's change, in the preview's report too (not only in the result -v prints)
        lines.append("host daemons the boot stage stops and disables (systemctl disable --now): %s%s"
                     % (", ".join(stack["daemons_stopped"]),
                        " (as %s records them)" % stack["daemons_source"] if stack.get("daemons_source") else ""))
    cold = firmware.get("cold_boot") or []
    if result.get("cold_boot_required"):
        lines.append("COLD BOOT NEEDED: %d ConnectX PF(s) (%s) hold firmware settings that only a power cycle loads; power "
                     "the host off and on, then run the boot stage again." % (len(cold), ", ".join(cold)))
    return lines


class FilterModule:
    """Boot stage filter."""

    def filters(self):
        return {"host_boot_options": host_boot_options, "host_boot_reboot_proof": host_boot_reboot_proof,
                "host_boot_unsettled": host_boot_unsettled, "host_boot_notes": host_boot_notes}
