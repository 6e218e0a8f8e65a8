# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight report, on the controller (pure), from the gate's one read (preflight_info's
result) and the inventory's desired state: the tenant plan (the plan the gate's check of the
tenants stage made on the host where it is the plan of the host as the host stages will leave it,
not planned twice; else the planner run here on that host model, a refusal being the report's
reason, not a failed task), then the report's checks (module_utils preflight/checks.py). Used by
the action ``preflight_report``, which the preflight role calls."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type


class PreflightReportError(ValueError):
    """An input the report cannot take: the message names it and the fix."""


def gate_plan(stage_checks):
    """The tenants check's plan, or {} when it is not the plan of the host as the stages leave
    it: no tenants check, an error, no plan in its result, or (outside a preview, whose check
    plans on the host as the stages leave it) an earlier stage's check that errs or would
    change the host (the check then planned on the host as it is)."""
    if stage_checks is None:
        return {}
    if not isinstance(stage_checks, dict):
        raise PreflightReportError("expected preflight_info's stage_checks (a dict), got %s" % type(stage_checks).__name__)
    tenants = stage_checks.get("tenants") or {}
    plan = (tenants.get("result") or {}).get("plan") if not tenants.get("error") else None
    if not isinstance(plan, dict):
        return {}
    if (tenants.get("options") or {}).get("preview") is None:
        for stage in ("boot", "sriov_vfio"):
            check = stage_checks.get(stage)
            if check and (check.get("error") or check.get("changed") is not False):
                return {}
    return plan


def _present(tenants):
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.defaults import stays  # pylint: disable=import-outside-toplevel
    return [t for t in tenants if not isinstance(t, dict) or stays(t)]


def _vf_pfs(sriov_pfs):
    """The PFs that get VFs (a count of 0 asks for none)."""
    pfs = []
    for item in sriov_pfs or []:
        if not isinstance(item, dict) or "pf" not in item:
            raise PreflightReportError("each of gpuvirt_sriov_pfs needs pf, got %r" % (item,))
        if str(item.get("num_vfs")) != "0":
            pfs.append(item["pf"])
    return pfs


def _unset(value):
    """None for an unset input (none, or "": how ansible-core 2.16 templates a variable set to none)."""
    return None if value == "" else value


def preflight_plan(info, tenants, policy=None, gpus=None, sriov_pfs=None, hugepages=None):
    """``{plan, error}`` for the preflight report from ``info`` (preflight_info's result):
    ``plan`` null where no tenant is present; the gate's plan where it stands (:func:`gate_plan`);
    else ``plan_tenants`` over the host model with the wanted VFs and hugepages added, with the
    policy's ``gpus`` (the GPUs given to tenants; unset, every GPU) and ``vf_pfs`` (the PFs that get
    VFs) from the inventory. A refusal of the planner (or of the projection) is ``error``, the
    report's reason."""
    if not isinstance(info, dict) or not isinstance(info.get("topology"), dict):
        raise PreflightReportError("expected the result of gpuvirt.tenancy.preflight_info (with its topology), got %s"
                                   % type(info).__name__)
    tenants = _unset(tenants)
    if not isinstance(tenants, list):
        raise PreflightReportError("expected the tenant list (gpuvirt_tenants), got %s" % type(tenants).__name__)
    policy = _unset(policy)
    if policy is not None and not isinstance(policy, dict):
        raise PreflightReportError("the policy (gpuvirt_tenant_policy) must be a dict, got %s" % type(policy).__name__)
    if not _present(tenants):
        return {"plan": None, "error": ""}
    taken = gate_plan(info.get("stage_checks"))
    if taken:
        return {"plan": taken, "error": ""}
    # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio.projection import project
    sriov_pfs, hugepages = _unset(sriov_pfs), _unset(hugepages)
    merged = dict(policy or {}, gpus=_unset(gpus), vf_pfs=_vf_pfs(sriov_pfs))
    try:
        projected = project(info["topology"], sriov_pfs or [], hugepages or [])
    except InputError as exc:
        return {"plan": None, "error": "gpuvirt.tenancy.preflight_projection: %s" % exc}
    try:
        return {"plan": tenant_plan.plan(projected, tenants, merged), "error": ""}
    except InputError as exc:
        return {"plan": None, "error": "gpuvirt.tenancy.plan_tenants: %s" % exc}


def preflight_report(info, desired, policy=None):
    """``{report, passed}``: the report of ``info`` (preflight_info's result: its topology, firmware
    and stage checks) against ``desired`` (the report's desired state: host, gpus, sriov_pfs,
    hugepages, tenants, ...), its plan made by :func:`preflight_plan` with the tenant ``policy``; a
    stage's refusal of its call that the gate's check found where the stage would give it too fails
    the host (module_utils preflight/checks.py ``standing_refusals``). ``passed``: no check failed."""
    from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.checks import evaluate  # pylint: disable=import-outside-toplevel
    if not isinstance(desired, dict):
        raise PreflightReportError("desired: give the report's desired state (a dict), got %s" % type(desired).__name__)
    planned = preflight_plan(info, desired.get("tenants", []), policy, desired.get("gpus"), desired.get("sriov_pfs"),
                             desired.get("hugepages"))
    stage_checks = info.get("stage_checks")
    if stage_checks is not None and not isinstance(stage_checks, dict):
        raise PreflightReportError("expected preflight_info's stage_checks (a dict), got %s" % type(stage_checks).__name__)
    try:
        report = evaluate(info["topology"], desired, info.get("firmware") or {}, planned["plan"], planned["error"] or None,
                          stage_checks or {})
    except InputError as exc:
        raise PreflightReportError(str(exc))
    return {"report": report, "passed": report.get("status") != "fail"}
