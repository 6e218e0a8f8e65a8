# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host stage makes of the result it takes: the preflight gate's check of its call where
gate_check answered it, else the stage's own call (stage_call's result) where it ran, else {}; with
the parts its role publishes and the lines it reports (plugin_utils stage_results, pure). Runs on
the controller only; asks the host nothing and changes nothing (the stage's ``changed`` is
``stage_changed``: the call's own task showed it already). ``stage: boot_settled`` takes the boot
stage's check after its reboot (``run``) and fails where the new kernel is not yet as the stage
wants it (stage_results.boot_unsettled names what is left)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_results import StageResultError, boot_unsettled, stage_result


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("stage", "checked", "run", "reboot_ok", "preview", "service"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        stage = args.get("stage")
        if stage == "boot_settled":
            return self._settled(result, args)
        try:
            if "reboot_ok" in args and stage != "boot":
                raise StageResultError("reboot_ok: only the boot stage takes it; leave it out of the %s stage's task" % stage)
            if "preview" in args and stage != "tenants":
                raise StageResultError("preview: only the tenants stage takes it; leave it out of the %s stage's task" % stage)
            if "service" in args and stage != "libvirt_mounts":
                raise StageResultError("service: only the libvirt_mounts stage takes it; leave it out of the %s stage's task" % stage)
            outcome = stage_result(stage, args.get("checked"), args.get("run"), reboot_ok=args.get("reboot_ok", False),
                                   preview=args.get("preview", False), check_mode=bool(self._task.check_mode),
                                   service=args.get("service"))
        except (StageResultError, ValueError) as exc:
            return dict(result, failed=True, changed=False, msg="stage_result: %s" % exc)
        result.update(outcome, changed=False)
        return result

    def _settled(self, result, args):
        """The boot stage's check after its reboot: failed, naming what is left, unless the new kernel is as wanted."""
        try:
            extra = sorted(set(args) - {"stage", "run"})
            if extra:
                raise StageResultError("%s: the boot_settled stage takes only run (the check after the reboot); leave %s out"
                                       % (", ".join(extra), "it" if len(extra) == 1 else "them"))
            unsettled = boot_unsettled(args.get("run"))
        except StageResultError as exc:
            return dict(result, failed=True, changed=False, msg="stage_result: %s" % exc)
        result.update(changed=False, result=args["run"], unsettled=unsettled)
        if unsettled:
            result.update(failed=True, msg="the new kernel is not as the boot stage wants it: %s" % "; ".join(unsettled))
        return result
