# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters ``gpuvirt.tenancy.reboot_share`` and ``gpuvirt.tenancy.deferred_hosts``: the rolling
bring-up's reboot budget (role host_stages, tasks_from boot; docs/fleet.md)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleFilterError

__metaclass__ = type


def reboot_share(batch, hostvars, budget):
    """The hosts of ``batch`` that reboot now: those whose boot stage needs a reboot
    (``host_boot_reboot_required``), in batch order, at most ``budget`` of them. Counting only
    the hosts that need one is what lets every host converge: a host that already rebooted
    does not take a place in the next run's budget."""
    try:
        budget = int(budget)
    except (TypeError, ValueError):
        raise AnsibleFilterError("gpuvirt.tenancy.reboot_share: gpuvirt_reboot_budget %r is not a number of hosts" % (budget,))
    if budget < 0:
        raise AnsibleFilterError("gpuvirt.tenancy.reboot_share: gpuvirt_reboot_budget %d is negative" % budget)
    needing = [host for host in batch if _needs_reboot(hostvars, host)]
    return needing[:budget]


def deferred_hosts(hostvars, hosts):
    """The hosts whose boot stage was deferred by the reboot budget in this run."""
    return [host for host in hosts if bool((hostvars.get(host) or {}).get("gpuvirt_reboot_deferred"))]


def _needs_reboot(hostvars, host):
    value = (hostvars.get(host) or {}).get("host_boot_reboot_required")
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)


class FilterModule:
    """Fleet filters."""

    def filters(self):
        return {"reboot_share": reboot_share, "deferred_hosts": deferred_hosts}
