# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which of a placed tenant's GPUs and VFs share a PCIe switch on the host, read from the host
model's ``gpu_nic_affinity`` (host/topology: PIX, at most one switch between them; PXB, several
bridges and no host bridge), each VF by its own row or its PF's, as the planner ranks them
(placement/index ``_RankRow``): the ``pcie_switches`` of its ``tenant_domain`` entry, so that
the guest sees each such set under one emulated switch (libvirt/domain_switch). Pure."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import affinity

__metaclass__ = type

# the levels at which a GPU and a VF share a switch on the host (no host bridge between them)
UNDER_ONE_SWITCH = ("PIX", "PXB")


def pair_level(topology, gpu, vf, vf_pf=None):
    """The host's level between ``gpu`` and ``vf`` (its own, else its PF's: ``vf_pf``, the
    placement's, or the host model's ``physfn``), or None when the host model has neither."""
    row = (topology.get("gpu_nic_affinity") or {}).get(gpu) or {}
    if vf in row:
        return row[vf]
    pf = vf_pf or ((topology.get("pci_devices") or {}).get(vf) or {}).get("physfn")
    return row.get(pf) if pf else None


def switch_groups(topology, gpus, vfs, vf_pfs=None):
    """-> [{"devices": [GPUs then VFs], "level": the farthest pair's level}]: the tenant's GPUs and
    VFs joined where a GPU and a VF share a switch on the host (UNDER_ONE_SWITCH), one entry per
    set so joined that holds a GPU and a VF, in the order of ``gpus``."""
    vf_pfs = vf_pfs or {}
    links = {}
    for gpu in gpus:
        for vf in vfs:
            level = pair_level(topology, gpu, vf, vf_pfs.get(vf))
            if level in UNDER_ONE_SWITCH:
                links[(gpu, vf)] = level
    groups = []
    for gpu in gpus:
        if any(gpu in group["devices"] for group in groups):
            continue
        found_gpus, found_vfs = [gpu], []
        grew = True
        while grew:
            grew = False
            for (one, vf), _level in sorted(links.items()):
                if one in found_gpus and vf not in found_vfs:
                    found_vfs.append(vf)
                    grew = True
                elif vf in found_vfs and one not in found_gpus:
                    found_gpus.append(one)
                    grew = True
        if not found_vfs:
            continue
        members_gpus = [g for g in gpus if g in found_gpus]
        members_vfs = [v for v in vfs if v in found_vfs]
        levels = [level for (one, vf), level in links.items() if one in found_gpus and vf in found_vfs]
        groups.append({"devices": members_gpus + members_vfs, "level": max(levels, key=affinity.rank)})
    return groups
