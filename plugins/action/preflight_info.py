# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate (module ``preflight_info``), run in the controller's process when its host
is a captured tree on the controller: the task's connection is ``local``, without become or
async, its Python (``ansible_python_interpreter``) is the one running ansible-playbook, and its
``root`` is not ``/``. That is the preview of a capture, where a module process
would do nothing but compile again the code this process has already imported (Python's zipimport
compiles each file of a module's zip twice, and the gate imports every stage's checks). The options
are validated and the gate runs as the module would run it (module_utils ``host/runner.run_here``);
everywhere else the module is shipped to the host and run there as usual."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible.plugins.action.normal import ActionModule as ModuleAction

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_here
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import info


class ActionModule(ModuleAction):

    def _runs_here(self, task_vars):
        root = self._task.args.get("root")
        if not (getattr(self._connection, "transport", None) == "local" and not self._play_context.become
                and not self._task.async_val and isinstance(root, str) and os.path.abspath(root) != os.sep):
            return False
        # the module's own Python only: another one may hold other libraries (libvirt-python)
        interpreter = (task_vars or {}).get("ansible_python_interpreter")
        if interpreter is not None:
            interpreter = self._templar.template(interpreter)
        return isinstance(interpreter, str) and os.path.realpath(interpreter) == os.path.realpath(sys.executable)

    def run(self, tmp=None, task_vars=None):
        if not self._runs_here(task_vars):
            return super(ActionModule, self).run(tmp, task_vars)
        return run_here("preflight_info", info.MODULE_ARGS, info.preflight_info, self._task.args,
                        check_mode=bool(self._task.check_mode), diff=bool(self._task.diff))
