# -*- coding: utf-8 -*-
"""nccl.conf editing and the GID index choice, over GID tables built from real show_gids
outputs (tests/fixtures/rdma)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nccl_conf as nc
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.rdma import RdmaReader

from fakes.rdma import read_fixture, tree_from_show_gids  # pylint: disable=import-error

H100 = "show_gids_h100-host_bare-metal_gid0-3_mlx5_0-1_partial.txt"
CX6 = "show_gids_mlx5_0_connectx6_two-linklocal-ipv6_plus-ipv4.txt"
POD = "show_gids_k8s-pod_4xmlx5_sriov-vf_gid4-7.txt"


def tables_of(tmp_path, name, ports=None):
    found = tree_from_show_gids(tmp_path, read_fixture("rdma", name))
    reader = RdmaReader(str(tmp_path))
    return dict((key, reader.gid_table(*key)) for key in found if ports is None or key in ports)


# -- the file -------------------------------------------------------------------------

CONF = """# site settings
NCCL_DEBUG=WARN
NCCL_IB_GID_INDEX=0
NCCL_IB_TC=106

NCCL_IB_GID_INDEX=1
"""


def test_render_rewrites_in_place_and_keeps_the_rest():
    out = nc.render_conf(CONF, {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_ADDR_FAMILY": None})
    assert out == "# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_GID_INDEX=3\nNCCL_IB_TC=106\n\nNCCL_IB_HCA=mlx5_0:1\n"
    assert nc.parse_conf(out)["NCCL_IB_GID_INDEX"] == "3"
    assert nc.render_conf(out, {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_HCA": "mlx5_0:1"}) == out


def test_render_removes_keys_set_to_none():
    out = nc.render_conf(CONF, {"NCCL_IB_GID_INDEX": None})
    assert "NCCL_IB_GID_INDEX" not in out
    assert out.startswith("# site settings\nNCCL_DEBUG=WARN\nNCCL_IB_TC=106\n")


def test_parse_last_value_wins_like_nccl():
    assert nc.parse_conf(CONF)["NCCL_IB_GID_INDEX"] == "1"


KEY = st.from_regex(r"NCCL_[A-Z]{1,8}", fullmatch=True)
UNMANAGED = st.one_of(
    st.from_regex(r"# [a-z ]{0,20}", fullmatch=True),
    st.builds(lambda k, v: "%s=%s" % (k, v), st.from_regex(r"OTHER_[A-Z]{1,6}", fullmatch=True),
              st.from_regex(r"[a-z0-9]{0,6}", fullmatch=True)),
    st.just(""),
)


@given(st.lists(UNMANAGED, max_size=8), st.dictionaries(KEY, st.one_of(st.none(), st.from_regex(r"[a-z0-9_:]{1,8}", fullmatch=True)), max_size=5))
def test_render_properties(unmanaged, settings):
    text = "\n".join(unmanaged) + ("\n" if unmanaged else "")
    out = nc.render_conf(text, settings)
    # unmanaged lines survive, in order
    kept = [line for line in out.splitlines() if not any(line.startswith(k + "=") for k in settings)]
    assert kept == unmanaged
    parsed = nc.parse_conf(out)
    for key, value in settings.items():
        assert parsed.get(key) == value
    # idempotent
    assert nc.render_conf(out, settings) == out


# -- the GID index ----------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("3", 3), (5, 5), ("discover", "discover"), ("AUTO", "auto"), (" 0 ", 0),
])
def test_parse_gid_index(value, expected):
    assert nc.parse_gid_index(value) == expected


@pytest.mark.parametrize("value", ["-1", "256", "three", "3.0", True, ""])
def test_parse_gid_index_refuses(value):
    with pytest.raises(InputError, match="gid_index"):
        nc.parse_gid_index(value)


@pytest.mark.parametrize("name, expected", [(H100, 3), (CX6, 5)])
def test_discover(tmp_path, name, expected):
    assert nc.discover_index(tables_of(tmp_path, name)) == expected


def test_discover_fails_with_the_table_when_a_port_lacks_it(tmp_path):
    # the capture of this pod was cut before mlx5_3's RoCE v2 entry
    with pytest.raises(InputError) as err:
        nc.discover_index(tables_of(tmp_path, POD))
    assert "mlx5_3:1" in str(err.value)
    assert "10.156.141.132" in str(err.value)  # the table is in the message


def test_discover_on_ports_that_hold_it(tmp_path):
    tables = tables_of(tmp_path, POD, ports=[("mlx5_0", 1), ("mlx5_1", 1)])
    assert nc.discover_index(tables) == 7


def test_index_3_refused_where_ipv4_sits_at_5(tmp_path):
    with pytest.raises(InputError) as err:
        nc.check_index(3, tables_of(tmp_path, CX6))
    msg = str(err.value)
    assert "mlx5_0:1 index 3 is RoCE v2 fe80:0000:0000:0000:1186:a6b1:3f0b:c441 (no IPv4)" in msg
    assert "use gid_index: 5" in msg
    assert len([line for line in msg.splitlines() if line.startswith("mlx5_0\t")]) == 6


@pytest.mark.parametrize("index, ok", [(3, True), (2, False), (1, False), (0, False), (4, False)])
def test_check_index_h100(tmp_path, index, ok):
    tables = tables_of(tmp_path, H100)
    if ok:
        nc.check_index(index, tables)
    else:
        with pytest.raises(InputError, match="gid_index %d refused" % index):
            nc.check_index(index, tables)


def test_different_indexes_on_listed_ports_point_to_auto(tmp_path):
    tables = tables_of(tmp_path / "a", H100, ports=[("mlx5_0", 1)])
    # both captures name their device mlx5_0; the ConnectX-6 one becomes mlx5_9 here
    cx6 = tables_of(tmp_path / "b", CX6)[("mlx5_0", 1)]
    tables[("mlx5_9", 1)] = [dict(r, device="mlx5_9") for r in cx6]
    with pytest.raises(InputError, match="gid_index: auto"):
        nc.discover_index(tables)


def test_auto_needs_a_gid_in_range(tmp_path):
    tables = tables_of(tmp_path, H100)
    assert nc.check_auto(tables, "11.0.0.0/24", "2.23.4") == "11.0.0.0/24"
    # the range of the real NCCL report (nccl-info_ib-addr-family_...): no GID in it here
    with pytest.raises(InputError, match="no RoCE v2 GID with an IPv4 address in 192.168.64.0/24"):
        nc.check_auto(tables, "192.168.64.0/24", None)
    with pytest.raises(InputError, match="NCCL >= 2.21"):
        nc.check_auto(tables, "11.0.0.0/24", "2.20.5")
    with pytest.raises(InputError, match="addr_range"):
        nc.check_auto(tables, "fe80::/64", None)


def test_gid_settings_clear_the_other_mode():
    expected = {"NCCL_IB_GID_INDEX": "5", "NCCL_IB_ADDR_FAMILY": None, "NCCL_IB_ADDR_RANGE": None,
                "NCCL_IB_ROCE_VERSION_NUM": None}
    assert nc.gid_settings("index", index=5) == expected
    auto = nc.gid_settings("auto", addr_range="10.0.0.0/8")
    assert auto["NCCL_IB_GID_INDEX"] is None and auto["NCCL_IB_ADDR_FAMILY"] == "AF_INET"
    assert auto["NCCL_IB_ROCE_VERSION_NUM"] == "2"


def test_auto_keys_are_the_ones_nccl_reports(tmp_path):
    # the real NCCL log prints "<KEY> set by environment to <value>" for each key auto pins
    log = read_fixture("nccl", "nccl-info_ib-addr-family_roce-version_addr-range_set-by-env_init-failure.txt")
    named = set(line.split("NCCL INFO ")[1].split(" set by")[0] for line in log.splitlines() if "set by environment" in line)
    assert named == set(nc.AUTO_KEYS)


@pytest.mark.parametrize("entries, expected", [
    (["mlx5_0:1", "rxeA"], {"exclude": False, "exact": False, "entries": [("mlx5_0", 1), ("rxeA", None)]}),
    ([], {"exclude": False, "exact": False, "entries": []}),
    # the examples of NCCL's documentation of NCCL_IB_HCA
    (["mlx5"], {"exclude": False, "exact": False, "entries": [("mlx5", None)]}),
    (["=mlx5_0:1,mlx5_1:1"], {"exclude": False, "exact": True, "entries": [("mlx5_0", 1), ("mlx5_1", 1)]}),
    (["^=mlx5_1,mlx5_4"], {"exclude": True, "exact": True, "entries": [("mlx5_1", None), ("mlx5_4", None)]}),
    (["^mlx5_bond_0:1"], {"exclude": True, "exact": False, "entries": [("mlx5_bond_0", 1)]}),
    (["=mlx5_0:1"], {"exclude": False, "exact": True, "entries": [("mlx5_0", 1)]}),
    (["=mlx5_0:1", "mlx5_1:1"], {"exclude": False, "exact": True, "entries": [("mlx5_0", 1), ("mlx5_1", 1)]}),
])
def test_parse_hca(entries, expected):
    assert nc.parse_hca(entries) == expected


@pytest.mark.parametrize("entry", ["mlx5_0:x", "mlx5_0:1:2", "=^mlx5_0", "^^mlx5_0", "mlx5_0,^mlx5_1", "mlx5_0,", ":1"])
def test_parse_hca_refuses(entry):
    with pytest.raises(InputError, match="ib_hca"):
        nc.parse_hca([entry])


PORTS = {"mlx5_0": [1], "mlx5_1": [1, 2], "mlx5_10": [1], "rxe0": [1]}


@pytest.mark.parametrize("ib_hca, expected", [
    ([], [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_1", 2), ("mlx5_10", 1), ("rxe0", 1)]),
    # without '=' a name is a prefix: mlx5_1 also selects mlx5_10, as NCCL's documentation warns
    (["mlx5_1"], [("mlx5_1", 1), ("mlx5_1", 2), ("mlx5_10", 1)]),
    (["=mlx5_1"], [("mlx5_1", 1), ("mlx5_1", 2)]),
    (["=mlx5_1:2"], [("mlx5_1", 2)]),
    (["mlx5_1:2"], [("mlx5_1", 2)]),
    (["^=mlx5_1"], [("mlx5_0", 1), ("mlx5_10", 1), ("rxe0", 1)]),
    (["^mlx5"], [("rxe0", 1)]),
    (["^=mlx5_1:1,rxe0"], [("mlx5_0", 1), ("mlx5_1", 2), ("mlx5_10", 1)]),
    (["^mlx5_9"], [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_1", 2), ("mlx5_10", 1), ("rxe0", 1)]),
])
def test_hca_ports_select_what_nccl_would_use(ib_hca, expected):
    assert nc.hca_ports(nc.parse_hca(ib_hca), sorted(PORTS), PORTS.get) == expected


@pytest.mark.parametrize("ib_hca, match", [
    (["=mlx5"], "no RDMA device mlx5 on this host"),
    (["mlx5_9"], r"no RDMA device mlx5_9\* on this host"),
    (["=mlx5_0:2"], r"mlx5_0 has no port 2 \(ports: \[1\]\)"),
])
def test_hca_ports_refuse_what_the_host_lacks(ib_hca, match):
    with pytest.raises(InputError, match=match):
        nc.hca_ports(nc.parse_hca(ib_hca), sorted(PORTS), PORTS.get)


def test_a_crlf_file_gets_managed_lines_in_lf():
    """NCCL reads up to the \\n only: a CRLF line would give NCCL_IB_HCA=mlx5_0:1\\r."""
    text = "# site settings\r\nNCCL_DEBUG=WARN\r\nNCCL_IB_HCA=mlx5_0:1\r\n"
    after = nc.render_conf(text, {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3"})
    assert after == "# site settings\r\nNCCL_DEBUG=WARN\r\nNCCL_IB_HCA=mlx5_0:1\nNCCL_IB_GID_INDEX=3\n"
    assert nc.render_conf(after, {"NCCL_IB_HCA": "mlx5_0:1", "NCCL_IB_GID_INDEX": "3"}) == after


@pytest.mark.parametrize("line", ["NCCL_IB_HCA = mlx5_0:1\n", "NCCL_IB_HCA= mlx5_0:1\n", " NCCL_IB_HCA=mlx5_0:1\n"])
def test_a_managed_line_nccl_would_read_otherwise_is_rewritten(line):
    """NCCL splits at the first '=' and strips nothing: the name or value would hold the blank."""
    assert nc.render_conf(line, {"NCCL_IB_HCA": "mlx5_0:1"}) == "NCCL_IB_HCA=mlx5_0:1\n"


@pytest.mark.parametrize("entries, written", [
    ([" mlx5_0:1"], "mlx5_0:1"),
    (["=mlx5_0:1, mlx5_1:1 "], "=mlx5_0:1,mlx5_1:1"),
    (["^mlx5_2", "mlx5_3"], "^mlx5_2,mlx5_3"),
])
def test_ib_hca_is_written_as_it_was_checked(entries, written):
    assert nc.render_hca(nc.parse_hca(entries)) == written


@pytest.mark.parametrize("entries", [[""], ["mlx5_0:1", " "], ["mlx5_0:1", ""]])
def test_an_empty_ib_hca_entry_is_refused(entries):
    with pytest.raises(InputError, match="ib_hca: entry . is empty"):
        nc.parse_hca(entries)


@pytest.mark.parametrize("value, ok", [
    ("eth0", True), ("^docker,lo", True), ("=eth0,eth1", True), (" ens3 ", True), ("^=eth0", True),
    ("eth0 eth1", False), ("eth0,,eth1", False), ("", False), ("eth0:1", False), ("a/b", False),
    ("averyveryverylongname", False), ("==eth0", False), ("eth0,", False),
])
def test_socket_ifname_as_nccl_reads_it(value, ok):
    if ok:
        assert nc.check_socket_ifname(value) == value.strip()
    else:
        with pytest.raises(InputError, match="socket_ifname: .* is not NCCL_SOCKET_IFNAME's"):
            nc.check_socket_ifname(value)
