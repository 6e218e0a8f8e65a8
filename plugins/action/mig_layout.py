# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_mig role's mig_profile call: its options from the role's inputs, the layout checked; or,
given the call's result (and the call's after the reboot), the GPUs whose MIG mode change waits for a
reboot (plugin_utils mig, pure). Runs on the controller only; asks the host nothing and changes
nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mig import MigInputError, mig_profile_options, waiting_gpus

INPUT_ARGS = ("layout", "reset", "force", "nvidia_smi")
RESULT_ARGS = ("result", "after")


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(INPUT_ARGS + RESULT_ARGS)
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        try:
            if "result" in args:
                mixed = sorted(name for name in INPUT_ARGS if name in args)
                if mixed:
                    raise MigInputError("%s: give either the role's inputs (the call's options) or result (the call's "
                                        "result), not both" % ", ".join(mixed))
                waiting = waiting_gpus(args["result"], args.get("after"))
                result.update(changed=False, waiting=waiting, reboot_required=bool(waiting))
                return result
            if "after" in args:
                raise MigInputError("after: only with result (the mig_profile result before the reboot)")
            if "layout" not in args:
                raise MigInputError("layout: give gpu_mig_layout (gpuvirt_mig_layout), or result")
            options = mig_profile_options(args["layout"], args.get("reset", "auto"), args.get("force", False),
                                          args.get("nvidia_smi"))
        except MigInputError as exc:
            return dict(result, failed=True, changed=False, msg="mig_layout: %s" % exc)
        result.update(changed=False, options=options)
        return result
