# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host stage's one call: the stage's module (module_utils stage_checks STAGE_MODULES) run on
the host with the options given as one dict, the options a stage role built with the action
gate_check (so that the role lists no option of the call), or given as the stage's role inputs
(plugin_utils stage_calls builds the options, as gate_check does: a role whose call the gate does not
check, the standalone host_sriov's, builds and makes it in one task). The module gets the play's
module_defaults as a task naming it would (its own and its action groups'), and the call keeps
what a module task has: check mode, diff, async with a poll (the stage's status line and time
bound), its warnings and its result as it is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.module_defaults import with_module_defaults
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.stage_calls import StageInputError, stage_module, stage_options


class ActionModule(ActionBase):

    _VALID_ARGS = frozenset(("stage", "options", "inputs"))
    _supports_check_mode = True
    _supports_async = True

    def _with_defaults(self, module, options):
        """``options`` with the play's module_defaults for ``module`` where they set what the options do not."""
        return with_module_defaults(self._task, self._templar, module, options)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        stage = self._task.args.get("stage")
        options = self._task.args.get("options")
        try:
            module = stage_module(stage)
            if "inputs" in self._task.args:
                if "options" in self._task.args:
                    raise StageInputError("give the call either as options (a dict) or as inputs (the stage role's inputs), not both")
                options = stage_options(stage, self._task.args["inputs"])
        except StageInputError as exc:
            return dict(result, failed=True, changed=False, msg=str(exc) if "inputs" not in self._task.args else "%s: %s" % (stage, exc))
        if not isinstance(options, dict):
            return dict(result, failed=True, changed=False,
                        msg="options: give the options of the %s stage's %s call as a dict (the options gate_check "
                            "hands back), got %s" % (stage, module, type(options).__name__))
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result = merge_hash(result, self._execute_module(module_name=module, module_args=self._with_defaults(module, dict(options)),
                                                         task_vars=task_vars, wrap_async=wrap_async))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
