# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The play's module_defaults for a module an action runs itself (the actions stage_call and
libvirt_service), as a task naming that module would get them: its own and its action groups'."""

from __future__ import absolute_import, division, print_function

from ansible.executor import module_common

__metaclass__ = type


def with_module_defaults(task, templar, module, options):
    """``options`` with the play's module_defaults for ``module`` where they set what the options do not."""
    # what ansible-core's own actions package and service do for the module they run:
    # _apply_action_arg_defaults from 2.19, get_action_args_with_defaults before
    apply_defaults = getattr(module_common, "_apply_action_arg_defaults", None)
    if apply_defaults is not None:
        return apply_defaults(module, task, options, templar)
    with_defaults = getattr(module_common, "get_action_args_with_defaults")
    return with_defaults(module, options, task.module_defaults, templar, action_groups=task._parent._play._action_groups)
