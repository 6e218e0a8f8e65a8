# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gate_read``: what the preflight gate read for a later stage (its libvirt read, or its check of
the stage's call), while nothing has changed the host since; an empty dict once a stage did, so
that the later stage reads and calls on its own. ``stage_outcome``: what a host stage publishes
from the result it takes (the gate's check of its call, or its own call)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

__metaclass__ = type


def _flag(value, name, filter_name="stage_outcome"):
    """A flag as Jinja hands it over (a bool, or its text); unset (none, "") is false."""
    try:
        return boolean(value, strict=True) if value is not None and value != "" else False
    except TypeError as exc:
        raise AnsibleFilterError("gpuvirt.tenancy.%s: %s: %s" % (filter_name, name, exc))


def gate_read(read, key=None, changed=None):
    """``read`` (``preflight_libvirt_read`` or ``preflight_stage_checks_read``), or its ``key``
    (a stage's check), unless one of ``changed`` (the earlier stages' "changed the host" flags)
    is true: then {}."""
    if read is None:
        return {}
    if not isinstance(read, dict):
        raise AnsibleFilterError("gpuvirt.tenancy.gate_read: expected what the preflight gate read (a dict), got %s"
                                 % type(read).__name__)
    if not isinstance(changed, (list, tuple)) and changed is not None:
        raise AnsibleFilterError("gpuvirt.tenancy.gate_read: changed is a list of the earlier stages' flags, got %r"
                                 % (changed,))
    if any(_flag(flag, "changed", "gate_read") for flag in changed or []):
        return {}
    part = read.get(key) if key else read
    return part if isinstance(part, dict) else {}


# an empty firmware part, as iommu_grub returns it when it has no ConnectX work
NO_FIRMWARE = {"pending": [], "cold_boot": [], "reset": [], "messages": []}
STAGES = ("boot", "sriov_vfio", "tenants")


def stage_outcome(checked, run=None, stage=None, reboot_ok=False, check_mode=False):
    """What a host stage publishes. The result taken is the gate's check of this call where it
    answered (``checked``, gate_check's result), else the stage's own call (``run``) where it ran,
    else {} (nothing to ask). ``changed``; ``host_changed``: what a host model read before no
    longer shows, never in check mode. With ``stage``, that stage's parts: ``boot`` the reboot
    (now: due and allowed outside check mode; still required: due and not allowed or in check
    mode, or a firmware change waiting for one), what is pending, a cold boot, the firmware and
    GPU host stack parts; ``sriov_vfio`` the devices bound, their companions, the isolation and
    the VF part; ``tenants`` the plan, the foreign domains, the removed and those to restart."""
    name = "gpuvirt.tenancy.stage_outcome"
    if not isinstance(checked, dict):
        raise AnsibleFilterError("%s: expected gate_check's result, got %s" % (name, type(checked).__name__))
    if stage not in STAGES + (None, ""):
        raise AnsibleFilterError("%s: stage is one of %s, got %r" % (name, ", ".join(STAGES), stage))
    if _flag(checked.get("answered"), "answered"):
        taken = checked.get("result")
    else:
        taken = run if isinstance(run, dict) and not _flag(run.get("skipped"), "skipped") else {}
    if not isinstance(taken, dict):
        raise AnsibleFilterError("%s: the %s stage's result is not a dict (%s)" % (name, stage or "", type(taken).__name__))
    check_mode = _flag(check_mode, "check_mode")
    changed = _flag(taken.get("changed"), "changed")
    outcome = {"result": taken, "changed": changed, "host_changed": changed and not check_mode}
    if stage == "boot":
        due = _flag(taken.get("reboot_required"), "reboot_required")
        allowed = _flag(reboot_ok, "reboot_ok")
        outcome.update(
            reboot_now=due and allowed and not check_mode,
            reboot_required=(due and (not allowed or check_mode)) or bool(taken.get("firmware_pending")),
            pending=taken.get("pending") or [],
            cold_boot_required=bool(taken.get("cold_boot_required")),
            firmware_state=taken.get("firmware") or dict(NO_FIRMWARE),
            gpu_stack_plan=taken.get("gpu_stack") or {})
    elif stage == "sriov_vfio":
        outcome.update(bound=taken.get("devices") or [], companions=taken.get("companions") or [],
                       isolation=taken.get("isolation") or {}, sriov=taken.get("sriov") or {})
    elif stage == "tenants":
        outcome.update(plan=taken.get("plan") or {}, foreign=taken.get("foreign") or {}, removed=taken.get("removed") or [],
                       restart_required=taken.get("restart_required") or [])
    return outcome


class FilterModule:
    """The gate's reads for the later stages, and what a stage publishes."""

    def filters(self):
        return {"gate_read": gate_read, "stage_outcome": stage_outcome}
