# -*- coding: utf-8 -*-
"""meta/runtime.yml's filter tombstones against the filter files: a removed filter is offered by no
file, each tombstone names the action that replaced it, and no filter file is named after a
tombstoned filter (ansible-core loads no plugin file whose name is tombstoned, so the public filters
such a file still held would not be found)."""

from __future__ import annotations

import importlib
import os

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FILTER_DIR = os.path.join(REPO, "plugins", "filter")
# the host roles' wiring moved into actions (docs/ARCHITECTURE.md, "A stage's call, and which filters are public")
MOVED = {"host_boot_reboot_proof": "host_reboot", "host_boot_unsettled": "stage_result", "reboot_share": "reboot_share",
         "sriov_request": "stage_call", "libvirt_service_query": "libvirt_service", "libvirt_read_answers": "libvirt_service",
         "libvirt_service_due": "libvirt_service", "libvirt_host_preview": "libvirt_service", "preflight_plan": "preflight_report",
         "preflight_report": "preflight_report"}


def tombstoned():
    with open(os.path.join(REPO, "meta", "runtime.yml"), encoding="utf-8") as handle:
        routing = yaml.safe_load(handle)["plugin_routing"]["filter"]
    return dict((name, entry["tombstone"]) for name, entry in routing.items() if "tombstone" in entry)


def offered():
    names = {}
    for path in sorted(os.listdir(FILTER_DIR)):
        if path.endswith(".py"):
            module = importlib.import_module("ansible_collections.gpuvirt.tenancy.plugins.filter." + path[:-3])
            names.update((name, path) for name in module.FilterModule().filters())
    return names


def test_a_removed_filter_is_offered_by_no_file_and_its_tombstone_names_what_replaced_it():
    stones, filters = tombstoned(), offered()
    assert set(MOVED) <= set(stones)
    for name, action in MOVED.items():
        assert "gpuvirt.tenancy.%s" % action in stones[name]["warning_text"], (name, stones[name])
        assert stones[name]["removal_version"] == "0.2.0"
    assert sorted(set(stones) & set(filters)) == []


def test_no_filter_file_is_named_after_a_tombstoned_filter():
    files = [path[:-3] for path in os.listdir(FILTER_DIR) if path.endswith(".py")]
    assert sorted(set(files) & set(tombstoned())) == []
    # and every filter a file offers is documented beside it
    documented = set(path[:-4] for path in os.listdir(FILTER_DIR) if path.endswith(".yml"))
    assert set(offered()) == documented


def test_the_tenant_vf_settings_filter_is_tombstoned_with_the_way_that_replaced_it():
    """Removed with the SR-IOV/VFIO stage's VFs named by address: no action took its place, the tenants stage did."""
    stones, filters = tombstoned(), offered()
    assert "tenant_vf_settings" in stones and "tenant_vf_settings" not in filters
    text = stones["tenant_vf_settings"]["warning_text"]
    assert stones["tenant_vf_settings"]["removal_version"] == "0.2.0"
    for words in ("vfs as a count in gpuvirt_tenants", "gpuvirt.tenancy.tenant_vms", "gpuvirt.tenancy.tenant_domain",
                  "gpuvirt.tenancy.sriov_vfs its vf_settings"):
        assert words in text, text
    # the filter that shared its file is still offered, from a file named after it
    assert filters["sriov_pf_addresses"] == "sriov_pf_addresses.py"
