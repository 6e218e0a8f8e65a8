# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The netdev that carries a MAC (the tenant's VF) in facts gathered with the network subset, for
the guest_rdma role's soft-RoCE device (plugin_utils rdma, pure). Runs on the controller only; asks
the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, netdev_by_mac


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("facts", "mac"))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        try:
            netdev = netdev_by_mac(self._task.args.get("facts"), self._task.args.get("mac"))
        except RdmaInputError as exc:
            return dict(result, failed=True, changed=False, msg="rdma_netdev: %s" % exc)
        result.update(changed=False, netdev=netdev)
        return result
