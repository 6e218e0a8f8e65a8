# -*- coding: utf-8 -*-
"""The guest filters and the guest options: guest options into tenant_domain entries (checked by
the module's own argument spec), the report lines. The add_host entries are
the guest_inventory action's (tests/unit/plugins/plugin_utils/test_guest_inventory.py)."""

from __future__ import annotations

import re

import pytest
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuvirt.tenancy.plugins.filter.guest_report_lines import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.planning import tenant_plan
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.record import tenant_records
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_domain_one import TENANT_DOMAIN_OPTIONS
from fakes.guest_tenants import ACCESS, KEY, TENANTS  # pylint: disable=import-error

FILTERS = FilterModule().filters()


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


def test_guest_domains_reads_the_tenants_as_records():
    """The tenant's fields are the record's (tenancy/record.py: checked and normalised there once), not read again."""
    entries = [{"name": "tenant-a", "state": "running", "vcpus": 2, "memory_mb": 1024}]
    tenants = [dict(TENANTS[0], guest=dict(TENANTS[0]["guest"], management_mac="52:54:00:AA:00:0A"),
                    data_nic={"network": "gpuvirt-data", "mac": "02:00:00:AA:BB:CC"})]
    (entry,) = tenant_plan.guest_domains(entries, tenants, ACCESS)
    assert entry["management"]["mac"] == "52:54:00:aa:00:0a" and entry["data_nic"]["mac"] == "02:00:00:aa:bb:cc"
    # the records the tenants stage hands on are taken as they are
    assert tenant_plan.guest_domains(entries, tenant_records(tenants), ACCESS) == [entry]
    for bad, message in (({"image": "/srv/debian-12.qcow2"}, "tenants[0] (tenant-a): image: expected a dict"),
                         ({"data_nic": "gpuvirt-data"}, "tenants[0] (tenant-a): data_nic: expected a dict"),
                         ({"guest": "192.168.150.11"}, "tenants[0] (tenant-a): guest: expected a dict"),
                         ({"vcpus": None}, "tenants[0] (tenant-a): vcpus: required")):
        with pytest.raises(InputError, match=re.escape(message)):
            tenant_plan.guest_domains(entries, [dict(tenants[0], **bad)], ACCESS)


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
