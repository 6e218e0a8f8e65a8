# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the verbs library sees the guest's RDMA device, from the guest_rdma role's registered
results (the mlx_rocev2 read, the package install, the read after it); fails naming the host and
what keeps verbs from the device (plugin_utils rdma, pure). Runs on the controller only; asks the
host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, registered_verbs_problem


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("found", "installed", "reread"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        try:
            problem = registered_verbs_problem(args.get("found"), args.get("installed"), args.get("reread"))
        except RdmaInputError as exc:
            return dict(result, failed=True, changed=False, msg="rdma_verbs: %s" % exc)
        result.update(changed=False, problem=problem)
        if problem:
            host = (task_vars or {}).get("inventory_hostname") or "this host"
            result.update(failed=True, msg="%s: %s" % (host, problem))
        return result
