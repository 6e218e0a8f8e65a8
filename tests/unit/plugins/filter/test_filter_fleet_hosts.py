# -*- coding: utf-8 -*-
"""The reboot budget of the rolling bring-up (plugin_utils reboot_budget, the action reboot_share's logic) is
shared among the hosts that need a reboot, so every host converges within ceil(needing / budget) runs, and
the filter deferred_hosts names the hosts over it; the fleet filters fleet_hosts, fleet_libvirt_uri,
fleet_host_refusal and guest_stage_refusal."""

from __future__ import annotations

import math
import re

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.fleet_hosts import (
    deferred_hosts, fleet_host_refusal, fleet_hosts, fleet_libvirt_uri)
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.reboot_budget import RebootBudgetError, reboot_share

BATCH = ["h0", "h1", "h2", "h3"]


@pytest.mark.parametrize("needing, budget, rebooting", [
    ({"h0", "h1", "h2", "h3"}, 2, ["h0", "h1"]),
    ({"h2", "h3"}, 1, ["h2"]),  # the hosts that already rebooted take no place in the budget
    ({"h1", "h3"}, 2, ["h1", "h3"]),
    (set(), 2, []),
    ({"h0"}, 0, []),
])
def test_the_budget_goes_to_the_hosts_that_need_a_reboot_in_batch_order(needing, budget, rebooting):
    required = {h: h in needing for h in BATCH}
    assert reboot_share(BATCH, required, budget) == rebooting


@pytest.mark.parametrize("count, budget", [(1, 1), (4, 1), (4, 2), (7, 3), (8, 8)])
def test_every_host_converges_within_the_runs_the_budget_implies(count, budget):
    batch = ["h%d" % i for i in range(count)]
    needing = set(batch)
    runs = 0
    while needing:
        runs += 1
        rebooted = reboot_share(batch, {h: h in needing for h in batch}, budget)
        assert rebooted, "a run with hosts waiting rebooted none"
        needing -= set(rebooted)
        deferred = {h: {"gpuvirt_reboot_deferred": h in needing} for h in batch}
        assert deferred_hosts(deferred, batch) == [h for h in batch if h in needing]
    assert runs == math.ceil(count / budget)


def test_a_string_flag_as_templated_is_read():
    assert reboot_share(["h0", "h1", "h2"], {"h0": "True", "h1": "False"}, "1") == ["h0"]


@pytest.mark.parametrize("budget, words", [
    ("two", "gpuvirt_reboot_budget 'two' is not a number of hosts: give a whole number, 0 or more"),
    (None, "gpuvirt_reboot_budget None is not a number of hosts"),
    (True, "gpuvirt_reboot_budget True is not a number of hosts"),
    (-1, "gpuvirt_reboot_budget -1 is negative: give a whole number, 0 or more"),
])
def test_a_bad_budget_names_the_variable(budget, words):
    with pytest.raises(RebootBudgetError, match=re.escape(words)):
        reboot_share(BATCH, {}, budget)


# ---- fleet_host_refusal: which hosts a run (site.yml with check_mode, preflight.yml without) may touch

GROUPS = {"gpuvirt_hosts": ["dgx01", "dgx02"], "gpuvirt_preview": ["dgx01-preview"]}


@pytest.mark.parametrize("host, root, connection, check_mode, words", [
    # a run on hosts: only hosts of gpuvirt_hosts, whatever the connection or mode
    ("dgx01", "", "ssh", False, []),
    ("dgx01", "", "local", None, []),
    ("dgx01-preview", "", "local", True, ["dgx01-preview is not in the group gpuvirt_hosts", "fix gpuvirt_hosts_limit (dgx*)"]),
    # a preview: a local check-mode host of gpuvirt_preview only
    ("dgx01-preview", "/cap", "local", True, []),
    ("dgx01-preview", "/cap", "local", False, ["runs only with --check", "dgx01-preview (connection local, check mode False)"]),
    ("dgx01-preview", "/cap", "ssh", True, ["(connection ssh, check mode True)"]),
    ("dgx01", "/cap", "local", True, ["A preview (gpuvirt_host_root=/cap)", "dgx01 (connection local"]),
    ("dgx01-preview", "/cap", "", True, ["(connection not set, check mode True)"]),
    # a capture's preflight (no check mode asked): a local host of gpuvirt_preview only
    ("dgx01-preview", "/cap", "local", None, []),
    ("dgx01-preview", "/cap", "ssh", None, ["The preflight of a capture (gpuvirt_host_root=/cap)", "dgx01-preview is not one"]),
    ("dgx01", "/cap", "local", None, ["dgx01 is not one"]),
])
def test_fleet_host_refusal_names_the_host_and_the_fix(host, root, connection, check_mode, words):
    refusal = fleet_host_refusal(host, GROUPS, root, "dgx*", connection, check_mode)
    if not words:
        assert refusal == ""
    for word in words:
        assert word in refusal, refusal


def test_fleet_host_refusal_without_the_groups_refuses_every_host():
    assert "is not in the group gpuvirt_hosts" in fleet_host_refusal("dgx01", {}, "", "", "ssh", False)
    assert "runs only with --check" in fleet_host_refusal("dgx01-preview", {}, "/cap", "", "local", True)


@pytest.mark.parametrize("root, limit, pattern", [
    ("", "", "gpuvirt_hosts"),
    ("/tmp/dgx01", "", "gpuvirt_preview"),
    ("", "rack2", "rack2"),
    ("/tmp/dgx01", "dgx01-preview", "dgx01-preview"),
])
def test_fleet_hosts_is_the_limit_else_the_group_of_the_run(root, limit, pattern):
    assert fleet_hosts(root, limit) == pattern


@pytest.mark.parametrize("root, uri, preview_uri, uri_taken", [
    ("", "", "", "qemu:///system"),
    ("", "qemu+ssh://root@dgx01/system", "test:///default", "qemu+ssh://root@dgx01/system"),
    ("/tmp/dgx01", "qemu:///system", "", "test:///repo/playbooks/files/preview-libvirt-node.xml"),
    ("/tmp/dgx01", "", "test:///tmp/node.xml", "test:///tmp/node.xml"),
])
def test_fleet_libvirt_uri_is_the_hosts_or_the_previews(root, uri, preview_uri, uri_taken):
    assert fleet_libvirt_uri(root, uri, preview_uri, "/repo/playbooks/") == uri_taken


def test_fleet_libvirt_uri_of_a_preview_without_its_node_names_the_fix():
    with pytest.raises(AnsibleFilterError, match="playbook_dir .* or gpuvirt_preview_libvirt_uri"):
        fleet_libvirt_uri("/tmp/dgx01")
