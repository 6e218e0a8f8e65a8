# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host stage makes of the result it takes, on the controller (pure): the result is the
preflight gate's check of its call where the check answered it (action gate_check), else the
stage's own call (action stage_call) where it ran, else {} (nothing asked); from it the parts the
stage's role publishes and the lines it reports. Used by the action ``stage_result``, the one
place a stage role turns its call's result into facts and report lines."""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.libvirt_service import LibvirtServiceError, service_due
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.tenant_report import tenant_stage_report

__metaclass__ = type

STAGES = ("boot", "sriov_vfio", "tenants", "libvirt_mounts")
# an empty firmware part, as iommu_grub returns it when it has no ConnectX work
NO_FIRMWARE = {"pending": [], "cold_boot": [], "reset": [], "messages": []}


class StageResultError(ValueError):
    """An argument the action cannot take: the message names it and the fix."""


def flag(value, name):
    """A flag as a task hands it over (a bool, or its text); unset (none, "") is false."""
    try:
        return boolean(value, strict=True) if value is not None and value != "" else False
    except TypeError:
        raise StageResultError("%s: give true or false, got %r" % (name, value))


def taken_result(stage, checked, run):
    """The result ``stage`` takes: the gate's check where gate_check answered (``checked``), else
    the stage's call (``run``) where it ran (not skipped), else {}."""
    if not isinstance(checked, dict):
        raise StageResultError("checked: give gate_check's registered result (a dict), got %s" % type(checked).__name__)
    if run is not None and run != "" and not isinstance(run, dict):
        raise StageResultError("run: give stage_call's registered result (a dict), or none where it did not run; got %s"
                               % type(run).__name__)
    if flag(checked.get("answered"), "checked.answered"):
        taken = checked.get("result")
    else:
        taken = run if isinstance(run, dict) and not flag(run.get("skipped"), "run.skipped") else {}
    if not isinstance(taken, dict):
        raise StageResultError("the %s stage's result is not a dict (%s)" % (stage, type(taken).__name__))
    return taken


def boot_parts(taken, reboot_ok, check_mode):
    """The boot stage's parts: the reboot now (due and allowed outside check mode) or still required
    (due and not allowed or in check mode, or a firmware change waiting for one), what is pending, a
    cold boot, the firmware and GPU host stack parts."""
    due = flag(taken.get("reboot_required"), "reboot_required")
    allowed = flag(reboot_ok, "reboot_ok")
    return dict(reboot_now=due and allowed and not check_mode,
                reboot_required=(due and (not allowed or check_mode)) or bool(taken.get("firmware_pending")),
                pending=taken.get("pending") or [],
                cold_boot_required=bool(taken.get("cold_boot_required")),
                firmware_state=taken.get("firmware") or dict(NO_FIRMWARE),
                gpu_stack_plan=taken.get("gpu_stack") or {})


def boot_notes(result):
    """What the boot stage's iommu_grub result says beyond its changes, one line each: what the
    ConnectX firmware still needs, what the GPU host stack decided (and ACS), the host daemons the
    stage stops, and a cold boot the firmware needs (a power cycle, not a reboot)."""
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


def sriov_vfio_notes(result):
    """What the SR-IOV/VFIO stage's vfio_bind result says beyond its changes, one line each: the
    VFs that go to vfio-pci once they exist (a check mode run, before the VFs are made) and why the
    devices cannot go to different tenants (isolation)."""
    lines = []
    to_come = result.get("vfs_to_come") or []
    if to_come:
        lines.append("check mode: the VFs of %s do not exist yet (this call creates them); a run binds them to vfio-pci"
                     % ", ".join(to_come))
    isolation = result.get("isolation") or {}
    if isolation.get("viable") is False:
        lines.append("Not isolated for multi-tenant use: %s" % "; ".join(str(r) for r in isolation.get("reasons") or []))
    return lines


def boot_unsettled(after):
    """What the boot stage's check after its reboot (its iommu_grub call in check mode, ``after``)
    still finds to do, one line each: the check failed, a reboot still required, hugepage pools to
    change, or pools not allocated as requested (the kernel found too little contiguous memory).
    Empty when the new kernel is as wanted."""
    if not isinstance(after, dict):
        raise StageResultError("run: give the registered result of the boot stage's check after its reboot (a dict), got %s"
                               % type(after).__name__)
    problems = []
    if flag(after.get("failed"), "run.failed"):
        problems.append("the check failed: %s" % after.get("msg", ""))
    if flag(after.get("reboot_required"), "run.reboot_required"):
        problems.append("a reboot is still required: %s" % "; ".join(after.get("pending") or []))
    hugepages = after.get("hugepages") or {}
    if hugepages.get("changed"):
        problems.append("the hugepage pools would still change")
    for pool in hugepages.get("pages") or []:
        if pool.get("allocated") != pool.get("requested"):
            problems.append("%s pages on node %s: %s allocated of %s requested" % (
                pool.get("size"), pool.get("node"), pool.get("allocated"), pool.get("requested")))
    return problems


def stage_result(stage, checked, run=None, reboot_ok=False, preview=False, check_mode=False, service=None):
    """{result, stage_changed, host_changed, report, and the stage's parts} of what ``stage`` takes.
    ``host_changed``: what a host model read before no longer shows, never in check mode. The parts:
    ``boot`` boot_parts; ``sriov_vfio`` the devices bound, their companions, the isolation and the VF
    part; ``tenants`` the plan, the foreign domains, the removed and those to restart;
    ``libvirt_mounts`` with ``service`` (the libvirt service as the role read it before its mounts:
    the action libvirt_service's ``service``) ``restart_service``, whether libvirtd, running before,
    restarts to find a mount this run made. ``report``: the stage's lines (boot_notes, sriov_vfio_notes, the
    tenants' report, tenant_report.tenant_stage_report, its VF settings with ``preview``)."""
    if stage not in STAGES:
        raise StageResultError("stage: give one of %s, got %r" % (", ".join(STAGES), stage))
    taken = taken_result(stage, checked, run)
    check_mode = flag(check_mode, "check_mode")
    changed = flag(taken.get("changed"), "changed")
    outcome = {"result": taken, "stage_changed": changed, "host_changed": changed and not check_mode, "report": []}
    if stage == "boot":
        outcome.update(boot_parts(taken, reboot_ok, check_mode), report=boot_notes(taken))
    elif stage == "sriov_vfio":
        outcome.update(bound=taken.get("devices") or [], companions=taken.get("companions") or [],
                       isolation=taken.get("isolation") or {}, sriov=taken.get("sriov") or {}, report=sriov_vfio_notes(taken))
    elif stage == "tenants":
        outcome.update(plan=taken.get("plan") or {}, foreign=taken.get("foreign") or {}, removed=taken.get("removed") or [],
                       restart_required=taken.get("restart_required") or [],
                       report=tenant_stage_report(taken, flag(preview, "preview")))
    elif stage == "libvirt_mounts" and service is not None:
        try:
            outcome["restart_service"] = service_due(service, taken)["restart"]
        except LibvirtServiceError as exc:
            raise StageResultError("service: %s" % exc)
    return outcome
