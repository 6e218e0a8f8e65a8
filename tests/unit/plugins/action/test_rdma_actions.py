# -*- coding: utf-8 -*-
"""The guest_rdma role's actions as its tasks call them (their logic: tests/unit/plugins/plugin_utils/test_rdma.py,
where the role's two module calls run with the options rdma_calls and rdma_fleet build): each changes nothing;
rdma_verbs fails naming the host when verbs do not see the device; a bad argument is named."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.action import rdma_calls, rdma_fleet, rdma_netdev, rdma_verbs
from fakes.actions import run_action  # pylint: disable=import-error

SEEN = {"rdma_device": "rxe0", "verbs": {"tool": "/usr/bin/ibv_devices", "devices": ["rxe0"], "seen": True},
        "packages": {"family": "Debian", "wanted": ["rdma-core", "ibverbs-providers", "ibverbs-utils"], "missing": []}}
UNSEEN = dict(SEEN, verbs={"tool": "/usr/bin/ibv_devices", "devices": [], "seen": False})
FACTS = {"interfaces": ["lo", "enp7s0"], "lo": {"macaddress": "00:00:00:00:00:00"}, "enp7s0": {"macaddress": "52:54:00:00:00:0a"}}


def test_rdma_verbs_passes_when_verbs_see_the_device_and_fails_naming_the_host_when_not():
    skipped = {"skipped": True, "changed": False}
    ok = run_action(rdma_verbs, "rdma_verbs", {"found": SEEN, "installed": skipped, "reread": skipped},
                    task_vars={"inventory_hostname": "tenant-a"})
    assert not ok.get("failed") and ok["changed"] is False and ok["problem"] == ""
    bad = run_action(rdma_verbs, "rdma_verbs", {"found": UNSEEN, "installed": skipped, "reread": skipped},
                     task_vars={"inventory_hostname": "tenant-a"})
    assert bad["failed"] and bad["changed"] is False
    assert bad["msg"].startswith("tenant-a: verbs see no rxe0 (ibv_devices lists none) though the kernel holds it"), bad["msg"]


def test_rdma_netdev_finds_the_vfs_netdev():
    ran = run_action(rdma_netdev, "rdma_netdev", {"facts": FACTS, "mac": "52:54:00:00:00:0A"})
    assert not ran.get("failed") and ran["changed"] is False and ran["netdev"] == "enp7s0"


@pytest.mark.parametrize("plugin, name, args, message", [
    (rdma_netdev, "rdma_netdev", {"facts": FACTS, "mac": "52:54:00:00:00:0b"}, "rdma_netdev: no netdev carries 52:54:00:00:00:0b"),
    (rdma_netdev, "rdma_netdev", {"facts": [], "mac": "52:54:00:00:00:0b"}, "rdma_netdev: facts: expected ansible_facts"),
    (rdma_verbs, "rdma_verbs", {"found": "rxe0"}, "rdma_verbs: found (the mlx_rocev2 result) must be a dict, got str"),
    (rdma_calls, "rdma_calls", {"inputs": "mlx5_0"}, "guest_rdma: expected the role's inputs as a dict, got str"),
    (rdma_calls, "rdma_calls", {"inputs": {"device": "", "vf_mac": "", "port": 1, "gid_index": "discover"}},
     "guest_rdma: set guest_rdma_device"),
    (rdma_fleet, "rdma_fleet", {"gid_index": "discover"}, "rdma_fleet: result_var: give the name each host registered"),
    (rdma_fleet, "rdma_fleet", {"result_var": "__guest_rdma_rocev2", "gid_index": "discover"},
     "rdma_fleet: result_var: this host has no mlx_rocev2 result in __guest_rdma_rocev2 (got NoneType)"),
])
def test_a_bad_argument_is_named(plugin, name, args, message):
    ran = run_action(plugin, name, args)
    assert ran["failed"] and ran["changed"] is False and ran["msg"].startswith(message), ran
