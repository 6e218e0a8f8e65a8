# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The netdev that carries a MAC (the tenant's VF) in facts gathered with the network subset, for
the guest_rdma role's soft-RoCE device (plugin_utils rdma, pure). Runs on the controller only; asks
the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, netdev_by_mac
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("facts", "mac"))
    REFUSALS = (RdmaInputError,)
    PREFIX = "rdma_netdev"

    def decide(self, args, task_vars):
        return {"netdev": netdev_by_mac(args.get("facts"), args.get("mac"))}
