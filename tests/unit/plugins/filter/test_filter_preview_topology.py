# -*- coding: utf-8 -*-
"""Filter gpuvirt.tenancy.preview_topology: the registered host_topology_info result, projected."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.preview_topology import FilterModule

PREVIEW = FilterModule().filters()["preview_topology"]
HOST = {"topology": {"numa_nodes": [{"id": 0, "cpus": [0], "hugepages": {}}], "pci_devices": {}, "iommu": {"enabled": True, "groups": {}}},
        "changed": False}


def test_result_keeps_its_fields_and_gets_notes():
    result = PREVIEW(HOST, {"hugepages": [{"size": "1G", "count": 2, "node": 0}]})
    assert result["changed"] is False
    assert result["topology"]["numa_nodes"][0]["hugepages"]["1048576kB"]["total"] == 2
    assert "node 0: 2 x 1G hugepages (now 0), reserved by the boot stage" in result["preview_notes"]


@pytest.mark.parametrize("result, wanted, message", [
    ({}, {}, "expected the result registered from gpuvirt.tenancy.host_topology_info"),
    (HOST, {"hugepages": [{"size": "3M", "count": 1, "node": 0}]}, "gpuvirt.tenancy.preview_topology:"),
])
def test_bad_input_is_a_filter_error(result, wanted, message):
    with pytest.raises(AnsibleFilterError, match=message):
        PREVIEW(result, wanted)
