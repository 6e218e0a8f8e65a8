# -*- coding: utf-8 -*-
"""The reboot_share action as the boot stage's budget calls it: this play's batch and each of its
hosts' host_boot_reboot_required read from the task's vars, the budget shared in batch order, whether
this host reboots now. (tests/unit/roles/test_boot_stage_budget.py runs it for real with a budget of 0.)"""

from __future__ import annotations

from unittest import mock

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import reboot_share

BATCH = ["h0", "h1", "h2", "h3"]


def run(host, needing, budget):
    task = mock.MagicMock()
    task.args = {"budget": budget}
    task.action = "gpuvirt.tenancy.reboot_share"
    task.check_mode = False
    task.async_val = 0
    action = reboot_share.ActionModule(task, mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock(), mock.MagicMock())
    hostvars = {h: {"host_boot_reboot_required": h in needing, "inventory_hostname": h} for h in BATCH + ["other"]}
    return action.run(task_vars={"inventory_hostname": host, "ansible_play_batch": BATCH, "hostvars": hostvars})


@pytest.mark.parametrize("host, reboot_now", [("h0", False), ("h1", True), ("h2", False), ("h3", True)])
def test_the_budget_goes_to_the_batchs_hosts_that_need_a_reboot(host, reboot_now):
    # "other" needs one too, but is not in this batch
    shared = run(host, {"h1", "h3", "other"}, "2")
    assert not shared.get("failed") and shared["changed"] is False
    assert shared["rebooting"] == ["h1", "h3"] and shared["reboot_now"] is reboot_now
    assert run(host, {"h1", "h3"}, 1)["rebooting"] == ["h1"]


def test_a_bad_budget_fails_naming_the_variable():
    refused = run("h0", {"h0"}, "two")
    assert refused["failed"] and refused["msg"] == ("reboot_share: gpuvirt_reboot_budget 'two' is not a number of hosts: give a "
                                                    "whole number, 0 or more")
    assert "reboot_now" not in refused
