# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The tenants' guests that join the controller's inventory (role tenant_guests): the running
guests' ``add_host`` entries and names, the inventory's hosts taken from the task's variables
(``groups.all``); or, given a looped wait's result (``waited``), the guests that did not answer SSH
and how long each was waited for (plugin_utils guest_inventory, pure). Runs on the controller
only; asks the host nothing and changes nothing (the role's ``add_host`` task adds the hosts)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils import guest_inventory
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction

HOSTS_ARGS = ("tenants", "access", "jump_host", "plan", "links", "add")
WAIT_ARGS = ("waited", "host_name")


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(HOSTS_ARGS + WAIT_ARGS)
    REFUSALS = (ValueError,)
    PREFIX = "guest_inventory"

    def decide(self, args, task_vars):
        if "waited" in args:
            self.refuse_mixed(args, HOSTS_ARGS, guest_inventory.GuestWaitError,
                              "the tenants (the hosts to add) or waited (the wait's result)")
            failures = guest_inventory.wait_failures(args["waited"], args.get("host_name"))
            return {"unanswered": failures, "times": guest_inventory.wait_times(args["waited"])}
        if "host_name" in args:
            raise guest_inventory.GuestWaitError("host_name: only the wait's form (waited) takes it")
        if "tenants" not in args:
            raise guest_inventory.GuestInventoryError("tenants: give the tenant list (gpuvirt_tenants), or waited")
        known = (task_vars.get("groups") or {}).get("all") or []
        hosts = guest_inventory.guest_hosts(args["tenants"], args.get("access"), args.get("jump_host"), args.get("plan"),
                                            list(known), args.get("add", True), args.get("links"))
        return {"hosts": hosts, "names": [entry["name"] for entry in hosts]}
