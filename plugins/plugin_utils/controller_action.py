# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The anatomy of an action that runs on the controller only, asks the host nothing and changes
nothing: it takes its arguments (and, where it needs them, the task's variables), decides in pure
code of plugin_utils, and gives what it decided, or fails naming the bad input. One class, so each
such action states only its arguments, the errors that are refusals and its decision."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase


class ControllerAction(ActionBase):
    """Subclasses set ``_VALID_ARGS``, ``REFUSALS`` (the exception classes whose message is the
    refusal), ``PREFIX`` (what a refusal's message starts with, e.g. the action's name; None for
    none) and define ``decide(args, task_vars)`` -> the result's keys. The result is never
    ``changed``."""

    TRANSFERS_FILES = False
    _requires_connection = False
    REFUSALS = (ValueError,)
    PREFIX = None

    def decide(self, args, task_vars):
        raise NotImplementedError

    @staticmethod
    def refuse_mixed(args, other_form, error, either):
        """For an action of two forms: the arguments of the ``other_form`` given with this form's are
        refused, by name, with ``error`` ("NAMES: give either EITHER, not both")."""
        mixed = sorted(name for name in other_form if name in args)
        if mixed:
            raise error("%s: give either %s, not both" % (", ".join(mixed), either))

    def run(self, tmp=None, task_vars=None):
        result = super(ControllerAction, self).run(tmp, task_vars)
        try:
            made = self.decide(self._task.args, task_vars or {})
        except self.REFUSALS as exc:
            msg = str(exc) if self.PREFIX is None else "%s: %s" % (self.PREFIX, exc)
            return dict(result, failed=True, changed=False, msg=msg)
        result.update(made)
        result["changed"] = False
        return result
