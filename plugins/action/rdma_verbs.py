# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the verbs library sees the guest's RDMA device, from the guest_rdma role's registered
results (the mlx_rocev2 read, the package install, the read after it); fails naming the host and
what keeps verbs from the device (plugin_utils rdma, pure). Runs on the controller only; asks the
host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, registered_verbs_problem
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("found", "installed", "reread"))
    REFUSALS = (RdmaInputError,)
    PREFIX = "rdma_verbs"

    def decide(self, args, task_vars):
        problem = registered_verbs_problem(args.get("found"), args.get("installed"), args.get("reread"))
        if not problem:
            return {"problem": problem}
        host = task_vars.get("inventory_hostname") or "this host"
        return {"problem": problem, "failed": True, "msg": "%s: %s" % (host, problem)}
