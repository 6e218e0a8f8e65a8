# -*- coding: utf-8 -*-
"""Filters reboot_share and deferred_hosts: the reboot budget of the rolling bring-up is shared
among the hosts that need a reboot, so every host converges within ceil(needing / budget) runs."""

from __future__ import annotations

import math

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.reboot_share import deferred_hosts, reboot_share

BATCH = ["h0", "h1", "h2", "h3"]


@pytest.mark.parametrize("needing, budget, rebooting", [
    ({"h0", "h1", "h2", "h3"}, 2, ["h0", "h1"]),
    ({"h2", "h3"}, 1, ["h2"]),  # the hosts that already rebooted take no place in the budget
    ({"h1", "h3"}, 2, ["h1", "h3"]),
    (set(), 2, []),
    ({"h0"}, 0, []),
])
def test_the_budget_goes_to_the_hosts_that_need_a_reboot_in_batch_order(needing, budget, rebooting):
    hostvars = {h: {"host_boot_reboot_required": h in needing} for h in BATCH}
    assert reboot_share(BATCH, hostvars, budget) == rebooting


@pytest.mark.parametrize("count, budget", [(1, 1), (4, 1), (4, 2), (7, 3), (8, 8)])
def test_every_host_converges_within_the_runs_the_budget_implies(count, budget):
    batch = ["h%d" % i for i in range(count)]
    needing = set(batch)
    runs = 0
    while needing:
        runs += 1
        hostvars = {h: {"host_boot_reboot_required": h in needing, "inventory_hostname": h} for h in batch}
        rebooted = reboot_share(batch, hostvars, budget)
        assert rebooted, "a run with hosts waiting rebooted none"
        needing -= set(rebooted)
        deferred = {h: {"gpuvirt_reboot_deferred": h in needing} for h in batch}
        assert deferred_hosts(deferred, batch) == [h for h in batch if h in needing]
    assert runs == math.ceil(count / budget)


def test_a_string_flag_as_templated_is_read():
    hostvars = {"h0": {"host_boot_reboot_required": "True"}, "h1": {"host_boot_reboot_required": "False"}}
    assert reboot_share(["h0", "h1"], hostvars, "1") == ["h0"]


@pytest.mark.parametrize("budget", ["two", -1, None])
def test_a_bad_budget_names_the_variable(budget):
    with pytest.raises(AnsibleFilterError, match="gpuvirt_reboot_budget"):
        reboot_share(BATCH, {}, budget)
