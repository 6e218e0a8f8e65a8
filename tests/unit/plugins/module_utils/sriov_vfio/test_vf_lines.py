# -*- coding: utf-8 -*-
"""vf_lines: a PF's VF lines as ``ip link show`` prints them (real captures, each with its
.source.txt), and what they allow to compare."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sriov_vfio import vf_lines
from fakes.kernel import fixture_text  # pylint: disable=import-error


def test_parse_ip_link_real_capture():
    vfs = vf_lines.parse_ip_link_vfs(fixture_text("rdma/ip-link-show_pf-with-8-vfs_connectx4.txt"))
    assert sorted(vfs) == list(range(8))
    assert vfs[0] == {"mac": "00:00:00:00:00:00", "vlan": 0, "qos": 0, "spoofchk": False, "trust": False, "link_state": "auto"}


def test_parse_ip_link_infiniband_vf():
    # iproute2's own example of an IPoIB PF's VF (commit 738728cc, see the .source.txt): no MAC, its GUIDs
    vfs = vf_lines.parse_ip_link_vfs(fixture_text("rdma/ip-link-show_ib4_ipoib-pf_vf0-node-port-guid.txt"))
    assert vfs == {0: {"mac": None, "vlan": 0, "qos": 0, "spoofchk": False, "trust": False, "link_state": "disable",
                       "link_type": "infiniband", "node_guid": "22:44:33:00:33:11:00:33", "port_guid": "10:21:33:12:00:11:22:10"}}


MLX4 = "rdma/ip-link-show_connectx3-mlx4_vfs-vlan4095-no-trust.txt"


@pytest.mark.parametrize("desired, differ", [
    ({"mac": "00:00:00:00:00:00", "vlan": 0, "spoofchk": False, "trust": False}, []),   # vlan 4095 is none; trust not shown
    ({"vlan": 0, "spoofchk": True, "trust": False, "link_state": "auto"}, ["spoofchk"]),
    ({"vlan": 101, "spoofchk": False, "trust": True}, ["vlan"]),
])
def test_settings_differ_on_a_connectx3_line(desired, differ):
    # mlx4's lines (the capture in its .source.txt): "vlan 4095" for no VLAN, and no trust field
    vfs = vf_lines.parse_ip_link_vfs(fixture_text(MLX4))
    assert (vfs[0]["vlan"], vfs[0]["trust"]) == (4095, None)
    assert vf_lines.settings_differ(vfs[0], desired) == differ
    assert vf_lines.not_shown(vfs, {0: desired}) == {0: ["trust"]}
    # no line for the VF: every key differs
    assert vf_lines.settings_differ(None, desired) == list(desired)
