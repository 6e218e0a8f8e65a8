# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_mig role's mig_profile call: its options from the role's inputs, the layout checked; or,
given the call's result (and the call's after the reboot), the GPUs whose MIG mode change waits for a
reboot (plugin_utils mig, pure). Runs on the controller only; asks the host nothing and changes
nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.mig import MigInputError, mig_profile_options, waiting_gpus
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction

INPUT_ARGS = ("layout", "reset", "force", "nvidia_smi")
RESULT_ARGS = ("result", "after")


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(INPUT_ARGS + RESULT_ARGS)
    REFUSALS = (MigInputError,)
    PREFIX = "mig_layout"

    def decide(self, args, task_vars):
        if "result" in args:
            self.refuse_mixed(args, INPUT_ARGS, MigInputError,
                              "the role's inputs (the call's options) or result (the call's result)")
            waiting = waiting_gpus(args["result"], args.get("after"))
            return {"waiting": waiting, "reboot_required": bool(waiting)}
        if "after" in args:
            raise MigInputError("after: only with result (the mig_profile result before the reboot)")
        if "layout" not in args:
            raise MigInputError("layout: give gpu_mig_layout (gpuvirt_mig_layout), or result")
        return {"options": mig_profile_options(args["layout"], args.get("reset", "auto"), args.get("force", False),
                                               args.get("nvidia_smi"))}
