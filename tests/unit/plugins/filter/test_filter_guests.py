# -*- coding: utf-8 -*-
"""The guest filters: guest options into tenant_domain entries (checked by the module's own
argument spec), add_host entries with the jump, the wait's failures, the report lines."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.filter.guest_hosts import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.guest_image import data_nic_mac
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_one import TENANT_DOMAIN_OPTIONS
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.vf_mac import derived_mac

FILTERS = FilterModule().filters()
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDA ops@example"
TENANTS = [
    {"name": "tenant-a", "state": "running", "vlan": 101, "image": {"base": "/srv/debian-12.qcow2", "size_gb": 40},
     "guest": {"address": "192.168.150.11/24", "rdma_address": "10.20.0.11/24", "packages": ["numactl"]}},
    {"name": "tenant-b", "state": "running", "mac": "52:54:00:00:00:0B", "image": {"url": "https://x/y.qcow2", "checksum": "sha256:ab"},
     "guest": {"address": "192.168.150.12/24"}},
    {"name": "tenant-c", "state": "defined", "image": {"base": "/srv/debian-12.qcow2"}, "guest": {"address": "192.168.150.13/24"}},
    {"name": "tenant-d", "state": "running"},
]
ACCESS = {"user": "ops", "ssh_authorized_keys": [KEY],
          "management": {"network": "gpuvirt-mgmt", "gateway": "192.168.150.1", "dns": ["192.168.150.1"]}}


def test_guest_options_reach_the_entries_and_pass_the_module_spec():
    entries = [{"name": t["name"], "state": "running", "vcpus": 2, "memory_mb": 1024} for t in TENANTS]
    entries.append({"name": "tenant-old", "state": "absent"})
    out = tenant_plan.guest_domains(entries, TENANTS, dict(ACCESS, guest_dir="/srv/guests"))
    a = out[0]
    assert a["image"] == {"base": "/srv/debian-12.qcow2", "size_gb": 40}
    # only the packages asked for (the tenant's; the access lists none): no apt run on a first boot otherwise
    assert a["cloud_init"] == {"user": "ops", "ssh_authorized_keys": [KEY], "rdma_address": "10.20.0.11/24",
                               "packages": ["numactl"]}
    assert "packages" not in out[1]["cloud_init"]
    assert tenant_plan.guest_domains(entries, TENANTS, dict(ACCESS, packages=["rdma-core"]))[1]["cloud_init"]["packages"] == ["rdma-core"]
    assert a["management"] == {"network": "gpuvirt-mgmt", "gateway": "192.168.150.1", "dns": ["192.168.150.1"],
                               "address": "192.168.150.11/24"}
    assert "image" not in out[3] and "management" not in out[3]
    assert out[4] == {"name": "tenant-old", "state": "absent", "guest_dir": "/srv/guests"}
    validator = ArgumentSpecValidator(dict(TENANT_DOMAIN_OPTIONS, name=dict(type="str", required=True)))
    for entry in out:
        assert not validator.validate(entry).error_messages, entry
    # the inputs are not changed
    assert "image" not in entries[0]
    # a preview: no image nor seed (not in the capture), the NIC as planned
    preview = tenant_plan.guest_domains(entries, TENANTS, ACCESS, False)[0]
    assert "image" not in preview and "cloud_init" not in preview and preview["management"]["address"] == "192.168.150.11/24"


def test_a_data_nic_reaches_the_entry_and_its_mac_the_guest_stage():
    tenant = {"name": "tenant-e", "state": "running", "vfs": 0, "image": {"base": "/srv/debian-12.qcow2"},
              "data_nic": {"network": "gpuvirt-data"}, "guest": {"address": "192.168.150.15/24", "rdma_address": "10.20.0.15/24"}}
    entry = tenant_plan.guest_domains([{"name": "tenant-e", "state": "running", "vcpus": 1, "memory_mb": 1024}], [tenant], ACCESS)[0]
    assert entry["data_nic"] == {"network": "gpuvirt-data"}
    assert not ArgumentSpecValidator(dict(TENANT_DOMAIN_OPTIONS, name=dict(type="str", required=True))).validate(entry).error_messages
    (host,) = FILTERS["guest_hosts"]([tenant], ACCESS, {"name": "h"})
    # the data NIC is the RDMA NIC of a tenant without a VF: its derived MAC, as the tenants stage derives it
    assert host["gpuvirt_guest_vf_mac"] == data_nic_mac("tenant-e")
    given = dict(tenant, data_nic={"network": "gpuvirt-data", "mac": "02:00:00:AA:BB:CC"})
    assert FILTERS["guest_hosts"]([given], ACCESS, {"name": "h"})[0]["gpuvirt_guest_vf_mac"] == "02:00:00:aa:bb:cc"


def test_guest_hosts_are_the_running_guests_with_a_jump():
    plan = {"placements": {"tenant-a": {"vfs": ["0000:81:00.3", "0000:81:00.2"], "mac": None}}}
    hosts = FILTERS["guest_hosts"](TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11", "user": "ops", "port": 2222}, plan)
    assert [h["name"] for h in hosts] == ["tenant-a", "tenant-b"]
    a, b = hosts
    assert a["groups"] == ["gpuvirt_guests"] and a["ansible_host"] == "192.168.150.11" and a["ansible_user"] == "ops"
    assert a["ansible_ssh_common_args"] == "-o ProxyJump=ops@192.0.2.11:2222 -o StrictHostKeyChecking=accept-new"
    assert a["gpuvirt_guest_console_log"] == "/var/log/libvirt/qemu/tenant-a-console.log" and a["gpuvirt_tenant_host"] == "dgx01"
    # the first VF in PCI address order, its MAC derived as the tenants stage derives it
    assert a["gpuvirt_guest_vf_mac"] == derived_mac("tenant-a", 0)
    assert b["gpuvirt_guest_vf_mac"] == "52:54:00:00:00:0b"
    direct = FILTERS["guest_hosts"](TENANTS, dict(ACCESS, jump=False), {"name": "dgx01"})
    assert all("ansible_ssh_common_args" not in h for h in direct)
    # a static guest inventory that lists tenant-a keeps it as it says
    assert [h["name"] for h in FILTERS["guest_hosts"](TENANTS, ACCESS, {}, None, ["dgx01", "tenant-a"])] == ["tenant-b"]
    # tenant_guests_add_hosts false: the inventory lists the guests itself
    assert FILTERS["guest_hosts"](TENANTS, ACCESS, {}, None, [], False) == []
    assert len(FILTERS["guest_hosts"](TENANTS, ACCESS, {}, None, [], "true")) == 2


def test_guest_hosts_refuses_what_is_not_a_tenant_list():
    with pytest.raises(AnsibleFilterError, match="expected the tenant list"):
        FILTERS["guest_hosts"]({"tenant-a": {}})
    with pytest.raises(AnsibleFilterError, match="tenant tenant-a: guest must be a dict"):
        FILTERS["guest_hosts"]([{"name": "tenant-a", "guest": "192.168.150.11"}])


def test_wait_failures_name_the_tenant_and_its_console_log():
    hosts = FILTERS["guest_hosts"](TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11"})
    results = [{"item": hosts[0], "failed": True, "elapsed": 300, "msg": "Timeout when waiting for search string OpenSSH in 192.168.150.11:22"},
               {"item": hosts[1], "failed": False, "elapsed": 12, "port": 22}]
    assert FILTERS["guest_wait_failures"](results) == [
        "tenant tenant-a did not answer SSH on 192.168.150.11:22 within 300s (Timeout when waiting for search string OpenSSH in "
        "192.168.150.11:22); read its console log /var/log/libvirt/qemu/tenant-a-console.log on dgx01"]
    assert FILTERS["guest_wait_failures"](results[1:]) == []
    # with failed_when false the timeout has no failed flag, only no port
    quiet = [dict(results[0], failed=False, failed_when_result=False)]
    assert len(FILTERS["guest_wait_failures"](quiet)) == 1
    assert FILTERS["guest_wait_failures"]([{"item": hosts[0], "skipped": True}]) == []


HOSTS = FILTERS["guest_hosts"](TENANTS, ACCESS, {"name": "dgx01", "address": "192.0.2.11"})


@pytest.mark.parametrize("entries, names", [
    (HOSTS, ["tenant-a", "tenant-b"]),
    (HOSTS[1:], ["tenant-b"]),
    ([], []),
])
def test_guest_names_are_the_entries_names_in_order(entries, names):
    assert FILTERS["guest_names"](entries) == names


@pytest.mark.parametrize("entries, words", [
    ({"name": "tenant-a"}, "expected the guest_hosts entries \\(a list\\), got dict"),
    ([{"ansible_host": "192.168.150.11"}], "each guest_hosts entry has a name"),
])
def test_guest_names_name_a_bad_input(entries, words):
    with pytest.raises(AnsibleFilterError, match=words):
        FILTERS["guest_names"](entries)


@pytest.mark.parametrize("results, times", [
    # an answer and a timeout (wait_for's result has elapsed either way)
    ([{"item": HOSTS[0], "elapsed": 12, "port": 22, "changed": False},
      {"item": HOSTS[1], "elapsed": 600, "failed": False, "failed_when_result": False,
       "msg": "Timeout when waiting for search string OpenSSH in 192.168.150.12:22"}],
     [["tenant-a", 12], ["tenant-b", 600]]),
    # a result without elapsed reads ?
    ([{"item": HOSTS[1], "skipped": True}], [["tenant-b", "?"]]),
    ([], []),
])
def test_guest_wait_times_pair_each_guest_with_its_seconds(results, times):
    assert FILTERS["guest_wait_times"](results) == times


@pytest.mark.parametrize("results, words", [
    ({"results": []}, "expected the results of the looped wait, got dict"),
    ([{"elapsed": 3}], "each result is a wait over a guest_hosts entry"),
    (["tenant-a"], "each result is a wait over a guest_hosts entry"),
])
def test_guest_wait_times_name_a_bad_input(results, words):
    with pytest.raises(AnsibleFilterError, match=words):
        FILTERS["guest_wait_times"](results)


def test_report_lines():
    rows = [
        {"name": "tenant-a", "ssh": True, "kernel": "6.1.0-28-cloud-amd64", "vf": {"netdev": "enp7s0", "mac": "52:54:00:00:00:0a"},
         "rdma_device": "mlx5_0", "gid_index": 3, "vlan": 101,
         "exchanges": [{"peer": "tenant-b", "same_vlan": True, "ok": True}, {"peer": "tenant-c", "same_vlan": False, "ok": False}]},
        {"name": "tenant-b", "ssh": True, "kernel": "6.1.0-28-cloud-amd64", "vf": {"netdev": "enp7s0", "mac": "52:54:00:00:00:0b"},
         "rdma_device": "mlx5_0", "gid_index": 3, "vlan": 101,
         "exchanges": [{"peer": "tenant-a", "same_vlan": True, "ok": False}, {"peer": "tenant-c", "same_vlan": False, "ok": True}]},
        {"name": "tenant-c", "ssh": True, "vf": {}, "gid_index": None},
        {"name": "tenant-d", "ssh": False, "console_log": "/var/log/libvirt/qemu/tenant-d-console.log"},
    ]
    assert FILTERS["guest_report_lines"](rows) == [
        "tenant-a: guest answers over SSH (kernel 6.1.0-28-cloud-amd64); VF enp7s0 52:54:00:00:00:0a; RDMA mlx5_0 GID index 3; "
        "RDMA within VLAN 101: tenant-b ok; across VLANs: tenant-c blocked",
        "tenant-b: guest answers over SSH (kernel 6.1.0-28-cloud-amd64); VF enp7s0 52:54:00:00:00:0b; RDMA mlx5_0 GID index 3; "
        "RDMA within VLAN 101: tenant-a FAILED; across VLANs: tenant-c NOT BLOCKED",
        "tenant-c: guest answers over SSH (kernel unknown); VF not found; RDMA none GID index unknown; "
        "RDMA within VLAN: not checked; across VLANs: not checked",
        "tenant-d: guest does NOT answer over SSH (console log /var/log/libvirt/qemu/tenant-d-console.log)",
    ]
    with pytest.raises(AnsibleFilterError, match="each row needs a name"):
        FILTERS["guest_report_lines"]([{"ssh": True}])


def test_report_lines_without_a_guest_and_with_the_hosts_vf_settings():
    host_vf = {"address": "0000:01:10.0", "mac": "52:54:00:6b:0a:01", "vlan": 101, "spoofchk": True, "trust": False}
    rows = [
        # a diskless domain (the lab's tenants): what the host set, and nothing claimed of a guest
        {"name": "tenant-a", "guest": False, "host_vfs": [host_vf]},
        # a guest nobody asked: not "does not answer"
        {"name": "tenant-b", "host_vfs": [dict(host_vf, address="0000:01:10.2", vlan=0, spoofchk=False, trust=True)]},
        {"name": "tenant-c", "ssh": True, "kernel": "6.1.0-28-cloud-amd64", "vf": {"netdev": "enp7s0", "mac": "52:54:00:6b:0a:01"},
         "host_vfs": [dict(host_vf, spoofchk=None, trust=None, mac=None)]},
    ]
    assert FILTERS["guest_report_lines"](rows) == [
        "tenant-a: no guest OS (a domain without an image): SSH, kernel, RDMA device, GID index and exchanges not checked; "
        "host sets VF 0000:01:10.0 MAC 52:54:00:6b:0a:01 VLAN 101 spoof check on trust off",
        "tenant-b: guest not checked over SSH; host sets VF 0000:01:10.2 MAC 52:54:00:6b:0a:01 VLAN none spoof check OFF trust ON",
        "tenant-c: guest answers over SSH (kernel 6.1.0-28-cloud-amd64); VF enp7s0 52:54:00:6b:0a:01; RDMA none GID index unknown; "
        "RDMA within VLAN: not checked; across VLANs: not checked; "
        "host sets VF 0000:01:10.0 MAC unset VLAN 101 spoof check unknown trust unknown",
    ]


def test_netdev_by_mac_from_gathered_facts():
    facts = {"interfaces": ["lo", "mgmt0", "enp7s0", "enp7s0.101"], "lo": {"macaddress": "00:00:00:00:00:00"},
             "mgmt0": {"macaddress": "56:2f:1c:aa:03:9e"}, "enp7s0": {"macaddress": "52:54:00:00:00:0a"},
             "enp7s0.101": {"macaddress": "52:54:00:00:00:0a"}}
    assert FILTERS["netdev_by_mac"](facts, "52:54:00:00:00:0A") == "enp7s0"
    with pytest.raises(AnsibleFilterError, match="no netdev carries 52:54:00:00:00:0b .*mgmt0 56:2f:1c:aa:03:9e"):
        FILTERS["netdev_by_mac"](facts, "52:54:00:00:00:0b")
