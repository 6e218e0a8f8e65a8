# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest_rdma role's inputs checked together and mapped to the options of its one mlx_rocev2
call (plugin_utils rdma, pure). Runs on the controller only; asks the host nothing and changes
nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, guest_rdma_calls
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("inputs", "family_packages"))
    REFUSALS = (RdmaInputError,)

    def decide(self, args, task_vars):
        return guest_rdma_calls(args.get("inputs"), args.get("family_packages"))
