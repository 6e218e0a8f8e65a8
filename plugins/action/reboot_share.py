# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling bring-up's reboot budget shared out among the hosts of this play's batch
(``ansible_play_batch``) whose boot stage needs a reboot (each host's ``host_boot_reboot_required``,
read from ``hostvars``), in batch order (plugin_utils reboot_budget, pure): whether this host
reboots now. Runs on the controller; asks the host nothing and changes nothing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.plugins.action import ActionBase

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_budget import RebootBudgetError, reboot_share


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("budget",))
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        batch = list(task_vars.get("ansible_play_batch") or [])
        hostvars = task_vars.get("hostvars") or {}
        # each host of the batch has run host_boot (boot_budget.yml is included by every one): its flag is set
        required = dict((host, hostvars[host].get("host_boot_reboot_required")) for host in batch if host in hostvars)
        try:
            rebooting = reboot_share(batch, required, self._task.args.get("budget"))
        except RebootBudgetError as exc:
            return dict(result, failed=True, changed=False, msg="reboot_share: %s" % exc)
        result.update(changed=False, rebooting=rebooting, reboot_now=task_vars.get("inventory_hostname") in rebooting)
        return result
