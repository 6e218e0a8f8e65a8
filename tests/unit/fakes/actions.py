# -*- coding: utf-8 -*-
"""An action plugin of the collection run as ansible-core runs it for one task, without a play:
the task's args and check mode, mocked connection, loader and templar (the collection's actions
that run on the controller use none of them)."""

from __future__ import annotations

from unittest import mock


def run_action(plugin, name, args, check_mode=False, task_vars=None):
    """``plugin`` (the action's module, e.g. ``plugins.action.gate_check``) run for a task of action
    ``gpuvirt.tenancy.<name>`` with ``args`` and the task's variables ``task_vars`` (none by default); its result."""
    task = mock.MagicMock()
    task.args = dict(args)
    task.action = "gpuvirt.tenancy.%s" % name
    task.check_mode = check_mode
    task.async_val = 0
    action = plugin.ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    return action.run(task_vars=dict(task_vars or {}))
