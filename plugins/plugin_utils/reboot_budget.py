# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling bring-up's reboot budget (gpuvirt_reboot_budget, docs/fleet.md), shared out on the
controller (pure): which hosts of a batch reboot now. Used by the action ``reboot_share``."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.plain_data import play_true

__metaclass__ = type


class RebootBudgetError(ValueError):
    """A budget that is no number of hosts: the message names the variable."""


def reboot_share(batch, required, budget):
    """The hosts of ``batch`` that reboot now: those whose boot stage needs a reboot (``required``:
    host -> its ``host_boot_reboot_required``), in batch order, at most ``budget`` of them. Counting
    only the hosts that need one is what lets every host converge: a host that already rebooted
    does not take a place in the next run's budget."""
    try:
        if isinstance(budget, bool):
            raise TypeError(budget)
        budget = int(budget)
    except (TypeError, ValueError):
        raise RebootBudgetError("gpuvirt_reboot_budget %r is not a number of hosts: give a whole number, 0 or more" % (budget,))
    if budget < 0:
        raise RebootBudgetError("gpuvirt_reboot_budget %d is negative: give a whole number, 0 or more" % budget)
    return [host for host in batch if play_true(required.get(host))][:budget]
