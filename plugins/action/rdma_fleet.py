# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guest_rdma role's fleet: the GID index compared across the play's hosts from each one's
mlx_rocev2 result (``ansible_play_hosts`` and ``hostvars`` of the task's variables), and what this
host's nccl_env call still writes after it (plugin_utils rdma, pure). Runs on the controller only;
asks the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.rdma import RdmaInputError, rdma_fleet, rdma_nccl_write
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("result_var", "gid_index", "gid_policy", "hosts_suffix", "options"))
    REFUSALS = (RdmaInputError,)
    PREFIX = "rdma_fleet"

    def decide(self, args, task_vars):
        name = args.get("result_var")
        if not name or not isinstance(name, str):
            raise RdmaInputError("result_var: give the name each host registered its mlx_rocev2 result under, got %r" % (name,))
        own = task_vars.get(name)
        if not isinstance(own, dict):
            raise RdmaInputError("result_var: this host has no mlx_rocev2 result in %s (got %s)" % (name, type(own).__name__))
        fleet = rdma_fleet(list(task_vars.get("ansible_play_hosts") or []), task_vars.get("hostvars") or {}, name,
                           args.get("gid_index"))
        write = rdma_nccl_write(fleet, own.get("nccl_env"), args.get("gid_index"), args.get("gid_policy"),
                                args.get("hosts_suffix") or "", args.get("options"), own)
        return dict(fleet, write=write)
