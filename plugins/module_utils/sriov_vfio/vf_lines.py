# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A PF's VFs as ``ip link show dev PF`` prints them: each VF's line read into its settings, and
what those lines allow to compare and to set (an Ethernet PF's VFs only)."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# "vf N     link/ether MAC brd ..." (iproute2 now), "vf N MAC MAC, ..." (older ones); a VF of an
# InfiniBand PF: "vf N     link/infiniband <20-byte address> brd ..., NODE_GUID g, PORT_GUID g, ..."
# (iproute2 738728cc), which has no MAC, VLAN or spoof check to set
_VF_LINE = re.compile(r"^\s*vf (\d+)\s+(?:(?:link/ether|MAC)\s+([0-9a-fA-F:]{17})|link/(infiniband)\s)")
_GUID = r"([0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){7})"
# the PF netdev's /sys/class/net/<dev>/type of an IPoIB port (ARPHRD_INFINIBAND, include/uapi/linux/if_arp.h)
_ARPHRD_INFINIBAND = 32


def parse_ip_link_vfs(text):
    """Per-VF settings from ``ip link show dev <pf>`` text: {index: {mac, vlan, qos,
    spoofchk, trust, link_state}} (vlan/qos 0 when the line shows none). A VF of an InfiniBand
    PF has ``mac`` None and also ``link_type`` "infiniband", ``node_guid`` and ``port_guid``
    (None when not shown)."""
    vfs = {}
    for line in (text or "").splitlines():
        match = _VF_LINE.match(line)
        if not match:
            continue
        vlan = re.search(r", vlan (\d+)", line)
        qos = re.search(r", qos (\d+)", line)
        spoof = re.search(r"spoof checking (on|off)", line)
        trust = re.search(r"trust (on|off)", line)
        state = re.search(r"link-state (\w+)", line)
        vf = vfs[int(match.group(1))] = {
            "mac": match.group(2).lower() if match.group(2) else None,
            "vlan": int(vlan.group(1)) if vlan else 0,
            "qos": int(qos.group(1)) if qos else 0,
            "spoofchk": None if spoof is None else spoof.group(1) == "on",
            "trust": None if trust is None else trust.group(1) == "on",
            "link_state": state.group(1) if state else None,
        }
        if match.group(3):
            node_guid = re.search(r", NODE_GUID " + _GUID, line)
            port_guid = re.search(r", PORT_GUID " + _GUID, line)
            vf.update(link_type=match.group(3), node_guid=node_guid.group(1).lower() if node_guid else None,
                      port_guid=port_guid.group(1).lower() if port_guid else None)
    return vfs


def check_ethernet_pf(pf, netdev, netdev_type, desired, current):
    """VF settings go to Ethernet VFs only: refused (before any change) on a PF whose netdev is
    InfiniBand (``netdev_type``, or its VFs' lines in ``current``). Every setting ``ip_vf_argv``
    sends (MAC, VLAN, spoof check, trust) is one an IPoIB netdev does not take."""
    if not desired:
        return
    if netdev_type != _ARPHRD_INFINIBAND and not any(vf.get("link_type") == "infiniband" for vf in current.values()):
        return
    raise InputError(
        "vfs: PF %s (%s) is an InfiniBand port: its VFs have no MAC, VLAN or spoof check, and ip link set dev %s vf N "
        "mac/vlan/spoofchk/trust is not supported on it, so the settings of VF %s cannot be applied. Nothing was changed. "
        "Set the port to Ethernet: LINK_TYPE_P1=ETH(2) (LINK_TYPE_P2 for port 2) through the boot stage's firmware settings "
        "(link_type: eth in the PF's gpuvirt_sriov_pfs entry), then a firmware reset or reboot; or drop the VF settings of this PF"
        % (pf, netdev, netdev, ", ".join(str(i) for i in sorted(desired))))


# ConnectX-3 (mlx4) shows "vlan 4095" for a VF with no VLAN set (no VF can be given 4095); older drivers or
# iproute2 leave trust (and spoof check, link state) out of a VF's line: a field not shown is not compared
_MLX4_NO_VLAN = 4095
_SHOWN_WHEN_KNOWN = ("spoofchk", "trust", "link_state")


def settings_differ(current, desired):
    """Keys of ``desired`` whose value differs from ``current`` (a VF line's settings; None when
    ip shows no line for the VF: every key differs). A field the line does not show is not a
    difference (:func:`not_shown` names it); mlx4's vlan 4095 is no VLAN (0)."""
    differ = []
    for key, value in desired.items():
        have = (current or {}).get(key)
        if key == "qos" and not value and not have:
            continue
        if key == "vlan" and have == _MLX4_NO_VLAN:
            have = 0
        if current is not None and have is None and key in _SHOWN_WHEN_KNOWN:
            continue
        if have != value:
            differ.append(key)
    return differ


def not_shown(current, desired):
    """{index: keys of its desired settings that its line in ``current`` does not show}: not compared."""
    missing = dict((index, [k for k in sorted(settings) if k in _SHOWN_WHEN_KNOWN and current[index].get(k) is None])
                   for index, settings in desired.items() if current.get(index) is not None)
    return dict((index, keys) for index, keys in missing.items() if keys)
