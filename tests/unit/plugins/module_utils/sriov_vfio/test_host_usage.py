# -*- coding: utf-8 -*-
"""host_usage over fake trees whose procfs tables are real captures
(tests/fixtures/host_usage) and whose device layout is the lab VM's (fakes.kernel.lab_host)."""

from __future__ import annotations

import ipaddress
import os

import pytest
from hypothesis import given, strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import host_usage as hu
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import is_address
from fakes.kernel import FIXTURES, fixture_text, lab_host  # pylint: disable=import-error


def test_parse_proc_route_real_capture():
    rows = hu.parse_proc_route(fixture_text("host_usage/proc-net-route_debian12_virtio-eth0_default-route.txt"))
    assert [(r["iface"], str(r["destination"]), str(r["gateway"]), str(r["mask"])) for r in rows] == [
        ("eth0", "0.0.0.0", "192.0.2.1", "0.0.0.0"),
        ("eth0", "192.0.2.0", "0.0.0.0", "255.255.255.0"),
    ]


def test_parse_ipv6_route_and_if_inet6_real_capture():
    rows = hu.parse_proc_ipv6_route(fixture_text("host_usage/proc-net-ipv6_route_debian12_virtio-eth0_default-route.txt"))
    defaults = [(r["iface"], bool(r["flags"] & 0x200)) for r in rows if int(r["destination"]) == 0 and r["prefix"] == 0]
    assert sorted(defaults) == [("eth0", False), ("lo", True)]  # lo: the kernel's "unreachable" reject route
    inet6 = hu.parse_if_inet6(fixture_text("host_usage/proc-net-if_inet6_debian12_virtio-eth0.txt"))
    assert inet6[ipaddress.IPv6Address("fd00::2")] == "eth0"
    assert inet6[ipaddress.IPv6Address("::1")] == "lo"


def test_parse_mountinfo_real_capture():
    rows = hu.parse_mountinfo(fixture_text("host_usage/proc-self-mountinfo_debian12_root-on-virtio-vda.txt"))
    root = [r for r in rows if r["mountpoint"] == "/"]
    assert root and (root[0]["major"], root[0]["minor"], root[0]["source"]) == (254, 0, "/dev/vda")


@pytest.fixture
def lab(tmp_path):
    host, _kernel = lab_host(tmp_path)
    return host


def test_lab_report_names_management_nic_and_disk(lab):
    report = hu.HostUsage(lab.root, ssh_connection="192.0.2.1 51000 192.0.2.2 22").report()
    assert sorted(report) == ["0000:00:05.0", "0000:00:06.0"]
    assert any("default route" in r for r in report["0000:00:05.0"])
    assert any("SSH connection" in r and "192.0.2.2" in r for r in report["0000:00:05.0"])
    assert any("mounted filesystem /" in r for r in report["0000:00:06.0"])
    assert any("boot disk controller" in r for r in report["0000:00:06.0"])
    # The tenant devices are free for tenants.
    assert "0000:81:00.0" not in report and "0000:82:00.0" not in report


@pytest.mark.parametrize("local, addr_json, expected", [
    ("192.0.2.2", None, "eth0"),                      # longest connected route in /proc/net/route
    ("192.0.2.2", "ip-j-addr_debian12_virtio-eth0.json", "eth0"),
    ("fd00::2", None, "eth0"),                         # /proc/net/if_inet6
    ("::ffff:192.0.2.2", None, "eth0"),                # IPv4-mapped
    ("198.51.100.7", None, None),                      # on no connected network of this host
])
def test_ssh_netdev(lab, local, addr_json, expected):
    text = fixture_text("host_usage/" + addr_json) if addr_json else None
    usage = hu.HostUsage(lab.root, ssh_connection="203.0.113.9 40000 %s 22" % local, ip_addr_json=text)
    address = usage.ssh_server_address()
    assert usage.netdev_of_address(address) == expected


def test_ssh_connection_from_ancestor_environ(lab):
    # become resets the environment: the session's variable lives in an ancestor.
    lab.write("/proc/300/status", "Name:\tpython3\nPPid:\t200\n")
    lab.write("/proc/300/environ", "PATH=/usr/bin\0HOME=/root\0")
    lab.write("/proc/200/status", "Name:\tsudo\nPPid:\t100\n")
    lab.write("/proc/200/environ", "SUDO_USER=admin\0")
    lab.write("/proc/100/status", "Name:\tsh\nPPid:\t1\n")
    lab.write("/proc/100/environ", "SSH_CONNECTION=192.0.2.1 51000 192.0.2.2 22\0USER=admin\0")
    assert str(hu.HostUsage(lab.root, pid=300).ssh_server_address()) == "192.0.2.2"
    assert hu.HostUsage(lab.root, pid=200, ssh_connection="").ssh_server_address() is None


def test_bridge_and_dm_are_followed_to_pci(lab):
    # A bridge over the management NIC, and a dm device over a partition of the disk.
    os.makedirs(lab.p("/sys/devices/virtual/net/br0"))
    lab.link("/sys/class/net/br0", "/sys/devices/virtual/net/br0")
    lab.link("/sys/devices/virtual/net/br0/lower_eth0", lab.pci_paths["0000:00:05.0"] + "/net/eth0")
    assert hu.HostUsage(lab.root).netdev_pci_devices("br0") == {"0000:00:05.0"}
    part = lab.pci_paths["0000:00:06.0"] + "/virtio1/block/vda/vda2"
    lab.write(part + "/partition", "2")
    lab.link("/sys/class/block/vda2", part)
    lab.write("/sys/devices/virtual/block/dm-0/dev", "253:0")
    lab.link("/sys/class/block/dm-0", "/sys/devices/virtual/block/dm-0")
    lab.link("/sys/devices/virtual/block/dm-0/slaves/vda2", part)
    assert hu.HostUsage(lab.root).block_pci_devices("dm-0") == {"0000:00:06.0"}
    assert hu.HostUsage(lab.root).block_pci_devices("vda2") == {"0000:00:06.0"}


def test_nothing_needed_on_an_empty_tree(tmp_path):
    assert not hu.HostUsage(str(tmp_path), ssh_connection="").report()


PCI = st.builds(lambda d, b, s, f: "%04x:%02x:%02x.%x" % (d, b, s, f),
                st.integers(0, 0xffff), st.integers(0, 0xff), st.integers(0, 0x1f), st.integers(0, 7))


@given(st.lists(st.one_of(PCI, st.sampled_from(["virtio1", "block", "net", "pci0000:00", "nvme0"])), max_size=8))
def test_pci_address_in_path_is_last_pci_component(parts):
    expected = next((p for p in reversed(parts) if is_address(p)), None)
    assert hu.pci_address_in_path("/sys/devices/" + "/".join(parts)) == expected


def _hexle(address):
    return "%08X" % int.from_bytes(address.packed, "little")


@given(st.lists(st.tuples(st.sampled_from(["eth0", "ens1f0", "br0"]), st.ip_addresses(v=4),
                          st.integers(0, 32)), min_size=1, max_size=6))
def test_parse_proc_route_roundtrip(routes):
    # Same layout as the real capture: header, then little-endian hex columns.
    header = fixture_text("host_usage/proc-net-route_debian12_virtio-eth0_default-route.txt").splitlines()[0]
    lines = [header]
    for iface, dest, prefix in routes:
        net = ipaddress.IPv4Network("%s/%d" % (dest, prefix), strict=False)
        lines.append("%s\t%s\t00000000\t0001\t0\t0\t0\t%s\t0\t0\t0" % (iface, _hexle(net.network_address), _hexle(net.netmask)))
    parsed = hu.parse_proc_route("\n".join(lines))
    assert [(r["iface"], ipaddress.IPv4Network("%s/%s" % (r["destination"], r["mask"]))) for r in parsed] == [
        (iface, ipaddress.IPv4Network("%s/%d" % (dest, prefix), strict=False)) for iface, dest, prefix in routes]


def test_fixtures_dir_is_repo_local():
    assert os.path.isdir(os.path.join(FIXTURES, "host_usage"))
