# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options of a host stage's one call, built from its role's inputs (plugin_utils stage_calls:
the mapping written once, the option types read from the module's argument spec), for the
preflight gate to check before the stage runs. Runs on the controller only; asks the host nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_module, stage_options


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("stage", "inputs"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        stage = self._task.args.get("stage")
        try:
            module = stage_module(stage)
            options = stage_options(stage, self._task.args.get("inputs"))
        except StageInputError as exc:
            return dict(result, failed=True, changed=False, msg="%s: %s" % (stage, exc))
        result.update(changed=False, module=module, options=options)
        return result
