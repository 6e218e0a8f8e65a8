# -*- coding: utf-8 -*-
"""The preflight filters as playbooks call them (preflight_projection, preflight_stop_lines): results, and
errors naming the input."""

from __future__ import annotations


import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.preflight_projection import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.plugin_utils.preflight_report import preflight_report
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

BARE = lab_capture("bare")
FILTERS = FilterModule().filters()


def test_projection_over_the_bare_lab():
    topo = read_topology(BARE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    projected = FILTERS["preflight_projection"](topo, [{"pf": "0000:81:00.0", "num_vfs": 2}], None)
    assert projected["pci_devices"]["0000:81:00.0"]["virtfns"] == ["0000:81:00.0/vf0", "0000:81:00.0/vf1"]


@pytest.mark.parametrize("name, args, match", [
    ("preflight_projection", ("text",), "expected the topology dict"),
    ("preflight_projection", ({"numa_nodes": [{"id": 0}]}, [], [{"size": "4K", "count": 1, "node": 0}]), "size '4K'"),
    ("preflight_stop_lines", ("PREFLIGHT FAILED", ["h1"]), "expected a preflight report"),
])
def test_bad_input_names_it(name, args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS[name](*args)


def test_stop_lines_of_a_failed_report():
    topo = read_topology(BARE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    report = preflight_report({"topology": topo}, {"host": "lab", "require_iommu_enabled": True})["report"]
    lines = FILTERS["preflight_stop_lines"](report, ["lab"], ["h0", "lab", "h2"], "/r/lab.json")
    assert lines[0] == "ROLLOUT STOPPED at the batch lab: preflight failed on lab"
    assert lines[1].startswith("  - iommu: present") and lines[-1] == "  report: /r/lab.json"
    assert "earlier batches, done: h0; later batches, not started: h2" in lines[-2]
