# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest_rdma role's inputs checked together and mapped to the options of its one mlx_rocev2
call (plugin_utils rdma, pure). Runs on the controller only; asks the host nothing and changes
nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, guest_rdma_calls


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("inputs", "family_packages"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        try:
            calls = guest_rdma_calls(self._task.args.get("inputs"), self._task.args.get("family_packages"))
        except RdmaInputError as exc:
            return dict(result, failed=True, changed=False, msg=str(exc))
        result.update(calls, changed=False)
        return result
