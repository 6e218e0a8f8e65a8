# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling bring-up's reboot budget shared out among the hosts of this play's batch
(``ansible_play_batch``) whose boot stage needs a reboot (each host's ``host_boot_reboot_required``,
read from ``hostvars``), in batch order (plugin_utils reboot_budget, pure): whether this host
reboots now. Runs on the controller; asks the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_budget import RebootBudgetError, reboot_share
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):

    _VALID_ARGS = frozenset(("budget",))
    REFUSALS = (RebootBudgetError,)
    PREFIX = "reboot_share"

    def decide(self, args, task_vars):
        batch = list(task_vars.get("ansible_play_batch") or [])
        hostvars = task_vars.get("hostvars") or {}
        # each host of the batch has run host_boot (boot_budget.yml is included by every one): its flag is set
        required = dict((host, hostvars[host].get("host_boot_reboot_required")) for host in batch if host in hostvars)
        rebooting = reboot_share(batch, required, args.get("budget"))
        return {"rebooting": rebooting, "reboot_now": task_vars.get("inventory_hostname") in rebooting}
