# -*- coding: utf-8 -*-
"""The guest stages refuse a run that would match no guest and add none: the
filter, table-driven, and the guest playbooks run by ansible-playbook on an inventory without
guests."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.filter.fleet_hosts import guest_stage_refusal

from conftest import REPO_ROOT  # pylint: disable=import-error
from fakes.playbook_run import run_playbook  # pylint: disable=import-error

NONE = {"all": ["dgx01"], "gpuvirt_hosts": ["dgx01"], "gpuvirt_guests": []}
SOME = {"all": ["dgx01", "tenant-a"], "gpuvirt_hosts": ["dgx01"], "gpuvirt_guests": ["tenant-a"]}


@pytest.mark.parametrize("groups, tenants_stage, run_tags, skip_tags, refused", [
    # site.yml whole, or with its tenants stage: that stage adds the guests (none: no tenant has one)
    (NONE, True, ["all"], [], False),
    (NONE, True, ["preflight", "tenants", "rdma"], [], False),
    # AWX's guests job: site.yml with tags rdma, gpu_sharing, and no guest listed
    (NONE, True, ["rdma", "gpu_sharing"], ["preflight"], True),
    (NONE, True, ["all"], ["tenants"], True),
    # rdma.yml / gpu_sharing.yml alone: the inventory's guests only
    (NONE, False, ["all"], [], True),
    ({"all": []}, False, None, None, True),
    (SOME, False, ["all"], [], False),
    (SOME, True, ["rdma", "gpu_sharing"], ["preflight"], False),
])
def test_guest_stages_refuse_a_run_that_matches_no_guest(groups, tenants_stage, run_tags, skip_tags, refused):
    said = guest_stage_refusal(groups, tenants_stage, run_tags, skip_tags)
    assert bool(said) == refused, said
    if refused:
        assert "match no guest" in said and "gpuvirt.tenancy.tenants" in said and "gpuvirt_guests" in said


@pytest.mark.parametrize("playbook", ["rdma.yml", "gpu_sharing.yml"])
def test_a_guest_playbook_on_an_inventory_without_guests_fails_naming_the_fix(tmp_path, playbook):
    """Before: 'skipping: no hosts matched', a green run that did nothing."""
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("gpuvirt_hosts:\n  hosts:\n    dgx01: {ansible_host: 192.0.2.10}\ngpuvirt_guests:\n  hosts: {}\n")
    rc, out, _records = run_playbook(["-i", str(inventory), os.path.join(REPO_ROOT, "playbooks", playbook)], tmp_path, timeout=300)
    assert rc != 0, out
    flat = " ".join(out.split())
    assert "The guest stages (rdma, gpu_sharing) match no guest" in flat and "plugin: gpuvirt.tenancy.tenants" in flat, flat
