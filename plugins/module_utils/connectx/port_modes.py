# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The link type (InfiniBand or Ethernet) of the ports of the ConnectX PFs that want VFs: what
each port is, what the boot stage makes it (the ``link_type`` of the PF's ``gpuvirt_sriov_pfs``
entry) and which ports change mode. One decision, taken by the boot stage
(:class:`boot_stage.Firmware`) and by the preflight report, so that the two agree.

Where a port's mode is read: the firmware query (``LINK_TYPE_P1``/``P2`` of mlxconfig or
mstconfig, on the host), else the PF's netdev in sysfs (``/sys/class/net/<dev>/type``:
ARPHRD_INFINIBAND 32 for an IPoIB netdev, ARPHRD_ETHER 1; include/uapi/linux/if_arp.h), else its
RDMA port's ``link_layer`` (a PF without netdev), which a capture holds. An mlx5 PF drives one port: function N is port N+1 of its card. A card whose
firmware has no LINK_TYPE setting (not VPI) keeps its ports' mode: an InfiniBand one is refused."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx import mlxconfig as mlx
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.connectx.pf_lookup import resolve_pf

__metaclass__ = type

LINK_TYPES = ("eth", "ib", "keep")
ETH, IB = "ETH", "IB"
ARPHRD_MODES = {1: ETH, 32: IB}
# infiniband/<dev>/ports/<n>/link_layer as the RDMA core writes it (drivers/infiniband/core/sysfs.c)
LINK_LAYER_MODES = {"InfiniBand": IB, "Ethernet": ETH}


def link_types(topology, sriov_pfs):
    """{PF address (as resolved, else as given): link_type or None} of ``gpuvirt_sriov_pfs``;
    a link_type outside :data:`LINK_TYPES` is refused."""
    result = {}
    for item in sriov_pfs or []:
        if not isinstance(item, dict):
            continue
        value = item.get("link_type")
        if value is not None and value not in LINK_TYPES:
            raise InputError("gpuvirt_sriov_pfs %s: link_type %r; give one of %s" % (item.get("pf"), value, ", ".join(LINK_TYPES)))
        result[resolve_pf(topology, item.get("pf")) or str(item.get("pf"))] = value
    return result


def _mode(shown):
    """``IB(1)``/``ETH(2)``/``VPI(3)`` as mlxconfig shows them -> IB, ETH, VPI."""
    return mlx.parse_value(str(shown))["text"].upper() if shown not in (None, "") else None


def firmware_ports(params):
    """[{port, current, next}] of a firmware query's LINK_TYPE_Pn (``mlx.report`` shape)."""
    return [{"port": "port %s" % name[-1], "current": _mode(params[name].get("current")),
             "next": _mode(params[name].get("next") or params[name].get("current")), "param": name}
            for name in mlx.LINK_TYPE_PARAMS if name in params]


def sysfs_ports(topology, pf):
    """[{port, current, next}] of the PF's own port, from its netdevs' type, else (no netdev: IPoIB
    not loaded) from its RDMA port's link layer (next: as now)."""
    dev = (topology.get("pci_devices") or {}).get(pf) or {}
    netdevs = topology.get("netdevs") or {}
    modes = [ARPHRD_MODES.get((netdevs.get(name) or {}).get("type")) for name in dev.get("netdevs") or []]
    if not any(modes):
        modes = [LINK_LAYER_MODES.get(layer) for ports in (dev.get("link_layers") or {}).values() for layer in ports.values()]
    modes = [m for m in modes if m]
    if not modes:
        return []
    port = "port %d" % (int(pf.rsplit(".", 1)[-1], 16) + 1)
    label = ", ".join((dev.get("rdma_devices") or []) + (dev.get("netdevs") or []))
    return [{"port": "%s (%s)" % (port, label), "current": modes[0], "next": modes[0], "param": None}]


def ports_of(topology, pf, entry):
    """``(ports, source)`` of a PF: from its firmware query ``entry`` (preflight_info's shape) when
    read and the card has LINK_TYPE settings; a card read without them is not VPI, its ports
    (from sysfs) ``fixed``; not read (a capture), from sysfs, assumed settable as a VPI card's."""
    if (entry or {}).get("status") == "ok":
        ports = firmware_ports(entry.get("params") or {})
        if ports:
            return ports, "firmware"
        ports = [dict(p, fixed=True) for p in sysfs_ports(topology, pf)]
    else:
        ports = sysfs_ports(topology, pf)
    return ports, "sysfs" if ports else None


def decide(pf, ports, link_type):
    """What the boot stage does to ``ports`` ([{port, current, next, param}]) for ``link_type``:
    ``(wanted {param: ETH}, changes [{pf, port, from, to}], refusal or None)``. ``eth`` sets
    Ethernet on every port (RoCE needs it); ``keep`` leaves the ports; a port not Ethernet at the
    next firmware load needs ``link_type`` said, and stays refused with ``ib`` or ``keep``: IB
    SR-IOV VFs need a node and port GUID per VF, which this collection does not set."""
    not_eth = [p for p in ports if p["next"] != ETH]
    fixed_ib = [p for p in not_eth if p.get("fixed")]
    refusal = None
    if fixed_ib:
        refusal = ("gpuvirt_sriov_pfs %s: %s InfiniBand and the card has no LINK_TYPE setting (not a VPI card): IB SR-IOV "
                   "VFs need a node and port GUID per VF, which this collection does not set (not built); leave this PF out "
                   "of gpuvirt_sriov_pfs" % (pf, ", ".join(p["port"] for p in fixed_ib)))
    elif link_type is None and not_eth:
        refusal = ("gpuvirt_sriov_pfs %s: a VPI card whose ports %s are not Ethernet (%s): set link_type: eth "
                   "(RoCE v2 for the tenants; the ports switch to Ethernet at the next firmware load) or "
                   "link_type: keep (no change; its VFs then carry no VLAN, MAC or spoof check)"
                   % (pf, ", ".join(p["port"] for p in not_eth), ", ".join("%s=%s" % (p["port"], p["next"]) for p in not_eth)))
    elif ports and (link_type == "ib" or (link_type == "keep" and not_eth)):
        refusal = ("gpuvirt_sriov_pfs %s: link_type %s leaves ports %s in InfiniBand mode: IB SR-IOV VFs need a node "
                   "and port GUID per VF, which this collection does not set (not built); use link_type: eth for "
                   "RoCE VFs, or leave this PF out of gpuvirt_sriov_pfs" % (pf, link_type, ", ".join(p["port"] for p in not_eth)))
    if refusal:
        return {}, [], refusal
    wanted = dict((p["param"], mlx.LINK_TYPE_ETH) for p in ports if p["param"]) if link_type == "eth" else {}
    changes = []
    for port in ports:
        after = ETH if link_type == "eth" else port["next"]
        if port["current"] != after:
            changes.append({"pf": pf, "port": port["port"], "from": port["current"], "to": after})
    return wanted, changes, None


def plan(topology, sriov_pfs, firmware):
    """Per ConnectX PF that wants VFs: {pf, link_type, source, changes, refusal}; ``source`` says
    where the ports' modes were read (firmware, sysfs, or none: nothing said)."""
    types = link_types(topology, sriov_pfs)
    result = []
    for target in mlx.firmware_targets(topology, sriov_pfs):
        pf = target["pf"]
        ports, source = ports_of(topology, pf, (firmware or {}).get(pf))
        _wanted, changes, refusal = decide(pf, ports, types.get(pf))
        result.append({"pf": pf, "link_type": types.get(pf), "source": source, "changes": changes, "refusal": refusal})
    return result
