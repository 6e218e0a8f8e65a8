# -*- coding: utf-8 -*-
"""The guest roles' filters that became actions: each is tombstoned in meta/runtime.yml at the
collection's version, and a play that still names one fails with the text naming the action that
replaced it (an action of plugins/action), not with "not found"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from fakes.playbook_run import ANSIBLE_CFG, COLLECTIONS, REPO_ROOT  # pylint: disable=import-error

REPLACED = {"guest_hosts": "guest_inventory", "guest_names": "guest_inventory", "guest_wait_times": "guest_inventory",
            "guest_wait_failures": "guest_inventory", "mig_profile_options": "mig_layout", "mig_reboot_gpus": "mig_layout",
            "mps_gpus": "mps_plan", "guest_rdma_calls": "rdma_calls", "netdev_by_mac": "rdma_netdev",
            "guest_verbs_problem": "rdma_verbs", "rdma_fleet": "rdma_fleet", "rdma_nccl_write": "rdma_fleet"}


def load(path):
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("name", sorted(REPLACED))
def test_the_removed_filter_names_the_action_that_replaced_it(name):
    tombstone = load("meta/runtime.yml")["plugin_routing"]["filter"][name]["tombstone"]
    assert tombstone["removal_version"] == load("galaxy.yml")["version"]
    action = REPLACED[name]
    assert "Use the action gpuvirt.tenancy.%s" % action in tombstone["warning_text"]
    assert os.path.exists(os.path.join(REPO_ROOT, "plugins", "action", action + ".py"))
    assert not os.path.exists(os.path.join(REPO_ROOT, "plugins", "filter", name + ".yml"))


def test_a_play_that_names_one_fails_with_that_text():
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "ansible.builtin.debug",
                           "-a", "msg={{ [] | gpuvirt.tenancy.guest_names }}"],
                          env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=ANSIBLE_CFG, ANSIBLE_NOCOLOR="1"),
                          capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode != 0
    said = " ".join((proc.stdout + proc.stderr).replace("'", " ").split())
    # ansible-core 2.16 says "was removed from gpuvirt.tenancy in version 0.2.0", later cores "has been removed"
    assert "gpuvirt.tenancy.guest_names" in said and ("has been removed" in said or "was removed from gpuvirt.tenancy" in said), said
    assert "Use the action gpuvirt.tenancy.guest_inventory instead" in said, said
