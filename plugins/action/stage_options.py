# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of a host stage's one call, built from its role's inputs (plugin_utils stage_calls:
the mapping written once, the option types read from the module's argument spec), for the
preflight gate to check before the stage runs. Runs on the controller only; asks the host nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_module, stage_options


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("stage", "inputs"))
    REFUSALS = (StageInputError,)

    def decide(self, args, task_vars):
        stage = args.get("stage")
        try:
            return {"module": stage_module(stage), "options": stage_options(stage, args.get("inputs"))}
        except StageInputError as exc:
            # the refusal names the stage asked for, whatever it is
            raise StageInputError("%s: %s" % (stage, exc))
