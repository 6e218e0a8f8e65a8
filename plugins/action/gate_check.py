# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate's check of a host stage's call, taken as that call's result when it answers
exactly the call the stage would make now (module_utils stage_checks.check_result decides), and
shown as the call's own: its ``changed`` and, with --diff, its differences. The call is given as its
options, or as the stage and its role's inputs (plugin_utils stage_calls builds the options, the
same the stage's call sends). Runs on the controller only: it is what spares the stage its call."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.stage_checks import check_result
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_options


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("check", "options", "stage", "inputs"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        check = self._task.args.get("check")
        options = self._task.args.get("options")
        if check is not None and not isinstance(check, dict):
            return dict(result, failed=True, changed=False,
                        msg="check: give one stage of preflight_info's stage_checks (a dict), or {} or null for none; "
                            "got %s" % type(check).__name__)
        if "stage" in self._task.args or "inputs" in self._task.args:
            if "options" in self._task.args or not ("stage" in self._task.args and "inputs" in self._task.args):
                return dict(result, failed=True, changed=False,
                            msg="give the call either as options (a dict) or as stage and inputs (the stage role's inputs), "
                                "not both")
            try:
                options = stage_options(self._task.args["stage"], self._task.args["inputs"], gate=True)
            except StageInputError as exc:
                return dict(result, failed=True, changed=False, msg="%s: %s" % (self._task.args["stage"], exc))
        if not isinstance(options, dict):
            return dict(result, failed=True, changed=False,
                        msg="options: give the dict of the options the stage's call would send now; got %s"
                            % type(options).__name__)
        answer = check_result(check or {}, options, check_mode=bool(self._task.check_mode))
        # the options come back as given: the stage that builds them in this task makes its call with them
        result.update(changed=bool(answer.get("changed")), answered=bool(answer), result=answer, options=options)
        if answer.get("diff"):
            result["diff"] = answer["diff"]
        return result
