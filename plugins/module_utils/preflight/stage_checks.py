# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate's checks of the host stages: each stage's call, with the inputs this run
gives it, run in check mode inside the gate's one call (preflight_info ``stage_checks``), so
that a stage of a converged host takes the gate's answer instead of a call of its own.

A stage name fixes its module (:data:`STAGE_MODULES`): a check of the boot stage is always an
iommu_grub check. The gate returns the options it checked; a stage takes the result only when
those are exactly the options it would send now, the check ran without error, and it changes
nothing or the play runs in check mode too (:func:`check_result`: the stage's own call would be
that same check), and nothing changed the host since the gate (the play's rule). Nothing is kept
on the host."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import Run, nested_params

__metaclass__ = type

# libvirt_mounts: the libvirt host role's hugetlbfs mounts for the tenants (a hugepages call with
# mounts only), checked so that a converged host needs no call of its own and a preview shows them
STAGE_MODULES = {"boot": "iommu_grub", "sriov_vfio": "vfio_bind", "tenants": "tenant_domain", "libvirt_mounts": "hugepages"}


def stage_feature(stage):
    """(argument spec, feature) of a stage's module, each imported by its own import statement
    (which is how AnsiballZ finds what to pack) and only when that stage is checked."""
    if stage == "boot":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import grub
        return grub.IOMMU_GRUB_ARGS, grub.iommu_grub
    if stage == "sriov_vfio":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import vfio
        return vfio.VFIO_BIND_ARGS, vfio.vfio_bind
    if stage == "tenants":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_domain_call
        return tenant_domain_call.TENANT_DOMAIN_ARGS, tenant_domain_call.tenant_domain
    if stage == "libvirt_mounts":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages
        return hugepages.MODULE_ARGS, hugepages.hugepages
    raise InputError("stage_checks: %r is not a host stage; give some of %s" % (stage, ", ".join(sorted(STAGE_MODULES))))


def validate_request(requested):
    """{stage: options} as given, refused with the input named when it is not that."""
    if not isinstance(requested, dict):
        raise InputError("stage_checks: give a dict of stage -> the options of its module's call, not %r" % (requested,))
    unknown = sorted(set(requested) - set(STAGE_MODULES))
    if unknown:
        raise InputError("stage_checks: %s is not a host stage; give some of %s"
                         % (", ".join(unknown), ", ".join(sorted(STAGE_MODULES))))
    for stage, options in requested.items():
        if not isinstance(options, dict):
            raise InputError("stage_checks.%s: give the options of the %s call as a dict, not %r"
                             % (stage, STAGE_MODULES[stage], options))
    return requested


def check_stage(host, stage, options, run, defaults=None):
    """One stage's call in check mode on ``host``, its options validated as its module validates
    them (``defaults``: options the call leaves to the play, such as the tenants stage's libvirt
    ``uri``, which the gate takes from its own libvirt read); its warnings go to ``run`` under
    the stage's name, its differences (``diff``, when ``run`` keeps them) into its result, for the
    stage that takes it to show as its own."""
    module_args, feature = stage_feature(stage)
    validated = nested_params("stage_checks.%s" % stage, "gpuvirt.tenancy." + STAGE_MODULES[stage], module_args,
                              dict(defaults or {}, **options))
    check_run = Run(check_mode=True, diff=run.diff.enabled)
    result = dict(feature(validated, host, check_run) or {})
    result["changed"] = bool(result.get("changed")) or check_run.changed
    if check_run.diff.entries:
        result["diff"] = check_run.diff.entries
    for message in check_run.warnings:
        run.warn("%s stage (checked by the gate): %s" % (stage, message))
    return result


def check_stages(host, requested, run, defaults=None):
    """stage -> {module, options, changed, result, error} for each stage of ``requested``
    (``defaults``: stage -> the options its call leaves to the play, see :func:`check_stage`). A
    check that fails is reported (``error``), not raised: the stage then runs its own call, which
    fails, if it does, in its own words."""
    checks = {}
    for stage in sorted(validate_request(requested)):
        check = {"module": STAGE_MODULES[stage], "options": requested[stage], "changed": None, "result": None,
                 "error": None}
        checks[stage] = check
        try:
            result = check_stage(host, stage, requested[stage], run, (defaults or {}).get(stage))
            check.update(changed=result["changed"], result=result)
        # Any failure of a check only means the stage runs its own call.
        except Exception as exc:  # pylint: disable=broad-except
            check["error"] = "%s: %s" % (type(exc).__name__, exc)
    return checks


def check_result(check, options, check_mode=False):
    """The gate's result for a stage about to send ``options``, or {} when it does not answer
    them: no check, an error, other options than these exactly, or (``check_mode`` false: the
    stage's call would change the host) something to change. In check mode the stage's own call
    would be the very check the gate made, so a check that changes something answers it too."""
    if not check or check.get("error") or check.get("changed") not in (False, True):
        return {}
    if check["changed"] and not check_mode:
        return {}
    if check.get("options") != options:
        return {}
    return check.get("result") or {}
