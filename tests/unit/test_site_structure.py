# -*- coding: utf-8 -*-
"""playbooks/site.yml: one rolling play (serial, max_fail_percentage, preflight gate first) runs
the same host roles, in the same order, as the host stage playbooks; the five stage playbooks
stay imported, each with its tag."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HOST_STAGES = ("boot.yml", "sriov_vfio.yml", "tenants.yml")


def load(name):
    with open(os.path.join(REPO, "playbooks", name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def roles_of(play):
    names = [r["role"] if isinstance(r, dict) else r for r in play.get("roles") or []]
    for task in (play.get("pre_tasks") or []) + (play.get("tasks") or []):
        for key in ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role"):
            if key in task:
                names.append(task[key]["name"])
    return names


def test_rolling_play_runs_the_host_stage_roles_in_order():
    rolling = load("site.yml")[0]
    stage_roles = []
    for name in HOST_STAGES:
        for play in load(name):
            if play.get("hosts") == "gpuvirt_hosts":
                stage_roles += roles_of(play)
    assert roles_of(rolling) == ["gpuvirt.tenancy.preflight"] + stage_roles


def test_rolling_play_keywords_and_gate():
    rolling = load("site.yml")[0]
    assert rolling["serial"] == "{{ gpuvirt_serial | default(1) }}"
    assert rolling["max_fail_percentage"] == "{{ gpuvirt_max_fail_percentage | default(0) }}"
    names = [t["name"] for t in rolling["tasks"]]
    gate = names.index("Fleet | Stop the rollout at this batch when a host fails preflight")
    first_stage = min(i for i, t in enumerate(rolling["tasks"]) if "boot" in (t.get("tags") or []))
    assert gate < first_stage
    assert set(rolling["tasks"][gate]["tags"]) == {"preflight", "always"}
    tags = set(tag for task in rolling["tasks"] for tag in task.get("tags") or [])
    assert {"boot", "sriov_vfio", "tenants"} <= tags


def test_site_imports_the_five_stage_playbooks_with_their_tags():
    imports = [(p["ansible.builtin.import_playbook"], p["tags"]) for p in load("site.yml")[1:]]
    assert imports == [("boot.yml", ["boot"]), ("sriov_vfio.yml", ["sriov_vfio"]), ("tenants.yml", ["tenants"]),
                       ("rdma.yml", ["rdma"]), ("gpu_sharing.yml", ["gpu_sharing"])]


@pytest.mark.parametrize("name", sorted(os.path.basename(p) for p in glob.glob(os.path.join(REPO, "playbooks", "*.yml"))))
def test_plays_on_hosts_and_guests_become_root(name):
    """A non-root SSH user works: every play that runs on the GPU hosts or the tenant guests
    becomes root; plays on the controller (localhost) and playbook imports do not."""
    for play in load(name):
        hosts = play.get("hosts")
        if hosts is None or "localhost" in hosts:
            assert "become" not in play, "%s: %s" % (name, play.get("name"))
        else:
            assert play.get("become") is True, "%s: %s needs become: true" % (name, play.get("name"))
