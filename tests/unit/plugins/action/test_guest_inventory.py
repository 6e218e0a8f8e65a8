# -*- coding: utf-8 -*-
"""The guest_inventory action as the tenant_guests role calls it: the running guests' add_host
entries and names, the inventory's own hosts (groups.all of the task's variables) left to it; with
a looped wait's result, the guests that did not answer and how long each was waited for. The task
changes nothing; a bad argument is named and no entry is given."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import guest_inventory
from fakes.actions import run_action  # pylint: disable=import-error

SIZE = {"vcpus": 2, "memory_mb": 1024}
TENANTS = [dict(SIZE, **tenant) for tenant in [
    {"name": "tenant-a", "state": "running", "image": {"base": "/srv/debian-12.qcow2"}, "guest": {"address": "192.168.150.11/24"}},
    {"name": "tenant-b", "state": "running", "mac": "52:54:00:00:00:0B", "image": {"base": "/srv/debian-12.qcow2"},
     "guest": {"address": "192.168.150.12/24"}},
    {"name": "tenant-c", "state": "defined", "image": {"base": "/srv/debian-12.qcow2"}, "guest": {"address": "192.168.150.13/24"}},
]]
JUMP = {"name": "dgx01", "address": "192.0.2.11", "user": "ops", "port": "22"}


def run(args, groups=None):
    return run_action(guest_inventory, "guest_inventory", args, task_vars={"groups": groups or {"all": ["dgx01"]}})


def test_the_running_guests_and_their_names_the_inventory_lists_none_of():
    ran = run({"tenants": TENANTS, "access": {"user": "gpuvirt"}, "jump_host": JUMP, "plan": {}, "links": {}, "add": "true"})
    assert not ran.get("failed") and ran["changed"] is False
    assert ran["names"] == ["tenant-a", "tenant-b"] == [host["name"] for host in ran["hosts"]]
    assert ran["hosts"][1]["ansible_ssh_common_args"] == "-o ProxyJump=ops@192.0.2.11 -o StrictHostKeyChecking=accept-new"
    assert ran["hosts"][1]["gpuvirt_guest_vf_mac"] == "52:54:00:00:00:0b" and ran["hosts"][0]["ansible_user"] == "gpuvirt"
    # a guest the inventory lists already is reached as it says
    listed = run({"tenants": TENANTS, "jump_host": JUMP}, groups={"all": ["dgx01", "tenant-a"], "gpuvirt_guests": ["tenant-a"]})
    assert listed["names"] == ["tenant-b"]
    assert run({"tenants": TENANTS, "add": False})["hosts"] == []


def test_the_waits_give_the_guests_that_did_not_answer_and_the_seconds():
    hosts = run({"tenants": TENANTS, "jump_host": JUMP})["hosts"]
    waited = {"changed": False, "results": [
        {"item": hosts[0], "elapsed": 3, "failed": False, "failed_when_result": False,
         "msg": "Timeout when waiting for search string OpenSSH in 192.168.150.11:22"},
        {"item": hosts[1], "elapsed": 1, "port": 22, "changed": False}]}
    ran = run({"waited": waited, "host_name": "dgx01"})
    assert not ran.get("failed") and ran["changed"] is False and "hosts" not in ran
    assert ran["unanswered"] == [
        "tenant tenant-a did not answer SSH on 192.168.150.11:22 within 3s (Timeout when waiting for search string OpenSSH in "
        "192.168.150.11:22); read its console log /var/log/libvirt/qemu/tenant-a-console.log on dgx01"]
    assert ran["times"] == [["tenant-a", 3], ["tenant-b", 1]]


@pytest.mark.parametrize("args, message", [
    ({"access": {}}, "guest_inventory: tenants: give the tenant list (gpuvirt_tenants), or waited; no host was added"),
    ({"tenants": {"tenant-a": {}}}, "guest_inventory: tenants: expected a list of tenant dicts (gpuvirt_tenants); no host was added"),
    # the tenant record's message: the tenant, the option, the fix
    ({"tenants": [dict(TENANTS[0], guest={"address": "127.0.0.1/24"})], "jump_host": JUMP},
     "guest_inventory: tenants[0] (tenant-a): guest.address: 127.0.0.1/24 is a loopback address, which no host can hold; give a "
     "host address; no host was added"),
    ({"tenants": [dict(TENANTS[0], name="localhost")], "jump_host": JUMP},
     "guest_inventory: tenant localhost: a name Ansible keeps for the controller"),
    ({"tenants": TENANTS, "add": "maybe"}, "guest_inventory: add (tenant_guests_add_hosts): 'maybe' is not a boolean"),
    ({"tenants": TENANTS, "host_name": "dgx01"}, "guest_inventory: host_name: only the wait's form (waited) takes it"),
    ({"waited": {"results": []}, "tenants": TENANTS},
     "guest_inventory: tenants: give either the tenants (the hosts to add) or waited (the wait's result), not both"),
    ({"waited": [], "host_name": "dgx01"}, "guest_inventory: waited: expected the looped wait's registered result (a dict), got list"),
])
def test_bad_arguments_are_named(args, message):
    result = run(args)
    assert result["failed"] and result["msg"].startswith(message) and result["changed"] is False, result
    assert "hosts" not in result and "unanswered" not in result
