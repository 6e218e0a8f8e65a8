# -*- coding: utf-8 -*-
"""GID table reader and RDMA-CM configfs, over fake sysfs trees built from real show_gids
outputs (tests/fixtures/rdma, each with its .source.txt)."""

from __future__ import annotations

import ipaddress
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import rdma
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.seam import Host

from fakes.rdma import FakeConfigfs, add_port, parse_show_gids, read_fixture, tree_from_show_gids  # pylint: disable=import-error
from fakes.unit_checks import udevadm_verify  # pylint: disable=import-error

SHOW_GIDS = [
    "show_gids_h100-host_bare-metal_gid0-3_mlx5_0-1_partial.txt",
    "show_gids_k8s-pod_4xmlx5_sriov-vf_gid4-7.txt",
    "show_gids_mlx5_0_connectx6_two-linklocal-ipv6_plus-ipv4.txt",
    "show_gids_pod-a_macvlan_gid4-5.txt",
    "show_gids_rdma-shared-container_mlx5_bond_0_gid12_partial.txt",
]


@pytest.mark.parametrize("name", SHOW_GIDS)
def test_table_reads_back_every_show_gids_row(tmp_path, name):
    text = read_fixture("rdma", name)
    tree_from_show_gids(tmp_path, text)
    rows = rdma.RdmaReader(str(tmp_path)).full_table()
    expected = sorted(parse_show_gids(text))
    got = sorted((r["device"], r["port"], r["index"], r["gid"], r["ipv4"],
                  {"RoCE v2": "v2", "RoCE v1": "v1"}[r["type"]], r["netdev"]) for r in rows)
    assert got == expected
    # 16 slots were written per port; the unused ones (zero GID, unreadable type) are skipped
    assert len(rows) == len(expected)


@pytest.mark.parametrize("name, expected", [
    # indexes stated in each capture's .source.txt
    ("show_gids_h100-host_bare-metal_gid0-3_mlx5_0-1_partial.txt", {"mlx5_0": {"1": 3}, "mlx5_1": {"1": 3}}),
    ("show_gids_mlx5_0_connectx6_two-linklocal-ipv6_plus-ipv4.txt", {"mlx5_0": {"1": 5}}),
    ("show_gids_pod-a_macvlan_gid4-5.txt", {"mlx5_4": {"1": 5}}),
    # the capture was cut before mlx5_3's index 7: no RoCE v2 + IPv4 GID on it
    ("show_gids_k8s-pod_4xmlx5_sriov-vf_gid4-7.txt",
     {"mlx5_0": {"1": 7}, "mlx5_1": {"1": 7}, "mlx5_2": {"1": 7}, "mlx5_3": {"1": None}}),
    ("show_gids_rdma-shared-container_mlx5_bond_0_gid12_partial.txt", {"mlx5_bond_0": {"1": None}}),
])
def test_roce_v2_ipv4_index(tmp_path, name, expected):
    tree_from_show_gids(tmp_path, read_fixture("rdma", name))
    rows = rdma.RdmaReader(str(tmp_path)).full_table()
    assert rdma.roce_v2_ipv4_indexes(rows) == expected


def test_ibv_devinfo_compressed_forms_normalize_to_sysfs_spelling():
    # ibv_devinfo prints GID 1 compressed and GID 3 as ::ffff:a.b.c.d; GID 0 and 2 are the same
    # addresses in the full spelling (RoCE v1 entries of the same capture)
    lines = read_fixture("rdma", "ibv_devinfo-v_gid-table_mlx5_bond_0_excerpt.txt").splitlines()
    gids = {}
    for line in lines:
        if "GID[" in line:
            index = int(line.split("[")[1].split("]")[0])
            gids[index] = line.split(":", 1)[1].strip().split(",")[0].strip()
    assert rdma.normalize_gid(gids[1]) == gids[0]
    assert rdma.normalize_gid(gids[3]) == gids[2]
    assert rdma.ipv4_of_gid(gids[3]) == "200.0.209.6"
    assert rdma.ipv4_of_gid(gids[2]) == "200.0.209.6"
    assert rdma.ipv4_of_gid(gids[0]) is None


@given(st.ip_addresses(v=4))
def test_ipv4_mapped_gid_roundtrip(address):
    packed = int(address)
    gid = "0000:0000:0000:0000:0000:ffff:%04x:%04x" % (packed >> 16, packed & 0xFFFF)
    assert rdma.ipv4_of_gid(gid) == str(address)
    assert rdma.normalize_gid("::ffff:%s" % address) == gid


@given(st.ip_addresses(v=6))
def test_non_mapped_gid_has_no_ipv4(address):
    gid = rdma.normalize_gid(address.exploded)
    assert gid == address.exploded
    assert (rdma.ipv4_of_gid(gid) is not None) == (address.ipv4_mapped is not None)
    if address.ipv4_mapped is not None:
        assert ipaddress.ip_address(rdma.ipv4_of_gid(gid)) == address.ipv4_mapped


def test_infiniband_link_layer_reports_ib(tmp_path):
    add_port(tmp_path, "mlx5_3", 1, [(0, "fe80:0000:0000:0000:b83f:d203:00a1:b2c4", "v1", "ib0")], link_layer="InfiniBand")
    rows = rdma.RdmaReader(str(tmp_path)).gid_table("mlx5_3", 1)
    assert [r["type"] for r in rows] == ["IB"]


def test_device_for_pci_and_netdev(tmp_path):
    add_port(tmp_path, "mlx5_0", 1, [(3, "0000:0000:0000:0000:0000:ffff:0b00:0048", "v2", "ens3np0")], pci="0000:81:00.0")
    reader = rdma.RdmaReader(str(tmp_path))
    assert reader.device_for_pci("0000:81:00.0") == ["mlx5_0"]
    assert reader.device_for_netdev("ens3np0") == ["mlx5_0"]
    assert reader.device_for_netdev("eth9") == []


def test_format_table_lists_every_row(tmp_path):
    tree_from_show_gids(tmp_path, read_fixture("rdma", "show_gids_mlx5_0_connectx6_two-linklocal-ipv6_plus-ipv4.txt"))
    rows = rdma.RdmaReader(str(tmp_path)).full_table()
    text = rdma.format_gid_table(rows)
    assert len(text.splitlines()) == len(rows) + 1
    assert "172.19.0.60" in text.splitlines()[6] and "v2" in text.splitlines()[6]


# -- configfs -------------------------------------------------------------------------


def configfs_host(tmp_path, ports, **kwargs):
    """A Host whose kernel side is the fake configfs (nothing else is patched)."""
    fake = FakeConfigfs(tmp_path, ports, **kwargs)
    return fake, Host(str(tmp_path), kernel=fake)


def test_roce_mode_read_write_through_configfs(tmp_path):
    fake, host = configfs_host(tmp_path, [("rxe0", 1)], mode="IB/RoCE v1")
    config = rdma.RoceModeConfig(host)
    assert config.available()
    assert config.read("rxe0", 1) == "v1"
    config.write("rxe0", 1, "v2")
    assert fake.modes[("rxe0", 1)] == "RoCE v2"
    assert config.read("rxe0", 1) == "v2"
    # the directory is created for each access and removed after it
    assert fake.mkdirs == ["rxe0", "rxe0", "rxe0"]
    assert fake.writes == [("/sys/kernel/config/rdma_cm/rxe0/ports/1/default_roce_mode", "RoCE v2")]
    assert not os.path.exists(os.path.join(fake.base, "rxe0"))


def test_roce_mode_unknown_device_is_a_state_error(tmp_path):
    _fake, host = configfs_host(tmp_path, [("rxe0", 1)])
    with pytest.raises(StateError, match="no RDMA device rxe9"):
        rdma.RoceModeConfig(host).read("rxe9", 1)


def test_roce_mode_bad_port_and_mode(tmp_path):
    fake, host = configfs_host(tmp_path, [("rxe0", 1)])
    config = rdma.RoceModeConfig(host)
    assert config.read("rxe0", 2) is None
    with pytest.raises(StateError, match="not a port"):
        config.write("rxe0", 2, "v2")
    with pytest.raises(InputError, match="default_roce_mode"):
        config.write("rxe0", 1, "v3")
    assert fake.modes[("rxe0", 1)] == "RoCE v2"


def test_persist_rule_names_device_and_mode():
    rule = rdma.persist_rule("rxeA", 1, "v2", "/usr/local/sbin/gpuvirt-roce-mode")
    assert 'KERNEL=="rxeA"' in rule
    assert 'RUN+="/usr/local/sbin/gpuvirt-roce-mode rxeA 1 RoCE v2"' in rule


def test_persist_rule_passes_udevadm_verify():
    rule = rdma.persist_rule("mlx5_0", 1, "v2", "/usr/local/sbin/gpuvirt-roce-mode")
    rc, output = udevadm_verify(rule)
    assert rc == 0, output
    assert rule.splitlines()[1] == ('ACTION=="add", SUBSYSTEM=="infiniband", KERNEL=="mlx5_0", '
                                    'RUN+="/usr/local/sbin/gpuvirt-roce-mode mlx5_0 1 RoCE v2"')


def test_udevadm_verify_refuses_the_rule_a_quote_in_a_name_breaks():
    rc, output = udevadm_verify(rdma.persist_rule('mlx5_0"', 1, "v2", "/usr/local/sbin/gpuvirt-roce-mode"))
    assert rc != 0 and "Invalid key/value pair" in output


def test_udevadm_verify_takes_a_second_run_a_quoted_name_adds():
    """Why roce refuses such a name (roce.udev_device_name) before any rule is written: the
    injected rule is valid udev syntax, so no verify would catch it."""
    rule = rdma.persist_rule('mlx5_0", RUN+="/bin/x', 1, "v2", "/usr/local/sbin/gpuvirt-roce-mode")
    rc, output = udevadm_verify(rule)
    assert rc == 0, output
    assert rule.splitlines()[1].count('RUN+=') == 3  # the script's and one from each place the name goes
