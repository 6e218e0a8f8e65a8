# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boot stage's reboot: ``host_boot_reboot_proof`` (whether the reboot is proven) and
``host_boot_unsettled`` (what the check of the new kernel still finds). The stage's call itself is
built by the actions gate_check and stage_options (plugin_utils stage_calls), and what its result
says is still due by the action stage_result (plugin_utils stage_results)."""

from __future__ import absolute_import, division, print_function

import base64

from ansible.errors import AnsibleFilterError

__metaclass__ = type


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


class FilterModule:
    """Boot stage filter."""

    def filters(self):
        return {"host_boot_reboot_proof": host_boot_reboot_proof, "host_boot_unsettled": host_boot_unsettled}
