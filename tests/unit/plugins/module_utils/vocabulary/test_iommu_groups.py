# -*- coding: utf-8 -*-
"""IOMMU group peers over the fake trees of the real captures (tests/unit/fakes/kernel.py)."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.iommu_groups import group_endpoints
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology

from fakes.kernel import rtx_group_host, v100_pairs_host  # pylint: disable=import-error


def test_bridges_are_not_endpoints(tmp_path):
    host, _kernel = rtx_group_host(tmp_path)
    topo = read_topology(host.root)
    assert group_endpoints(topo, "0000:01:00.0") == ["0000:01:00.1"]


def test_gpus_paired_in_a_group_see_each_other(tmp_path):
    host, _kernel = v100_pairs_host(tmp_path)
    topo = read_topology(host.root)
    gpus = sorted(a for a, d in topo["pci_devices"].items() if d["vendor_id"] == "0x10de")
    assert group_endpoints(topo, gpus[0]) == [gpus[1]]
