# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate's checks of the stages' records (:mod:`stage_record`): each recorded call
run again in check mode inside the gate's one call. Apart from :mod:`stage_record` because it
imports the stage modules' features, which only the gate needs (the runner, in every module,
imports :mod:`stage_record` to write a record)."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.runner import Run, nested_params
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.stage_record import read_records

__metaclass__ = type

STAGE_MODULES = ("iommu_grub", "vfio_bind", "tenant_domain")


def stage_feature(module_name):
    """(argument spec, feature) of a module a record may name. Imported only when a record
    names it (each costs its imports), and each by its own import statement, which is how
    AnsiballZ finds what to pack."""
    if module_name == "iommu_grub":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils import grub
        return grub.IOMMU_GRUB_ARGS, grub.iommu_grub
    if module_name == "vfio_bind":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils import vfio
        return vfio.VFIO_BIND_ARGS, vfio.vfio_bind
    if module_name == "tenant_domain":
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils import libvirt_domain
        return libvirt_domain.TENANT_DOMAIN_ARGS, libvirt_domain.tenant_domain
    raise InputError("the record names the module %r, which is not a stage module (%s)"
                     % (module_name, ", ".join(STAGE_MODULES)))


def check_stage(host, stage, record, overrides, run):
    """Run one recorded call in check mode on ``host``, its options validated as its module
    validates them, ``overrides`` (the options a play gives that module through module
    defaults, such as libvirt's uri) taking the record's place. The check's warnings go to
    ``run`` under the stage's name."""
    module_args, feature = stage_feature(record.get("module"))
    params = dict(record.get("params") or {})
    params.update(overrides or {})
    validated = nested_params("stage_checks", "gpuvirt.tenancy." + record["module"], module_args, params)
    check_run = Run(check_mode=True, diff=False)
    result = dict(feature(validated, host, check_run) or {})
    result["changed"] = bool(result.get("changed")) or check_run.changed
    for message in check_run.warnings:
        run.warn("%s stage (checked by the gate): %s" % (stage, message))
    return result


def check_stages(host, requested, run):
    """stage -> {recorded, module, digest, changed, result, error} for each stage of
    ``requested`` (stage -> overrides). A stage without a record, or whose check fails, is
    reported so (``recorded`` false, or ``error``): the stage then runs its own call, which
    fails, if it does, in its own words."""
    records = read_records(host)
    checks = {}
    for stage in sorted(requested or {}):
        record = records.get(stage)
        check = {"recorded": False, "module": None, "digest": None, "changed": None, "result": None, "error": None}
        checks[stage] = check
        if not isinstance(record, dict) or not record.get("digest"):
            continue
        check.update(recorded=True, module=record.get("module"), digest=record["digest"])
        try:
            result = check_stage(host, stage, record, requested[stage], run)
            check.update(changed=result["changed"], result=result)
        # Any failure of a check only means the stage runs its own call (which reports it as
        # its module does); the gate itself must not fail for it.
        except Exception as exc:  # pylint: disable=broad-except
            check["error"] = "%s: %s" % (type(exc).__name__, exc)
    return checks
