# -*- coding: utf-8 -*-
"""The preflight filters as playbooks call them: results, and errors naming the input."""

from __future__ import annotations


import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpuvirt.tenancy.plugins.filter.preflight_report import FilterModule
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import read_topology
from fakes.captured_trees import lab_capture  # pylint: disable=import-error

BARE = lab_capture("bare")
FILTERS = FilterModule().filters()


def test_report_and_projection_over_the_bare_lab():
    topo = read_topology(BARE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    projected = FILTERS["preflight_projection"](topo, [{"pf": "0000:81:00.0", "num_vfs": 2}], None)
    assert projected["pci_devices"]["0000:81:00.0"]["virtfns"] == ["0000:81:00.0/vf0", "0000:81:00.0/vf1"]
    report = FILTERS["preflight_report"](topo, {"host": "lab"}, None, None, "")
    assert report["status"] == "warn" and report["table"].startswith("Preflight lab: WARN")


@pytest.mark.parametrize("name, args, match", [
    ("preflight_report", (["not", "a", "dict"],), "expected the topology dict"),
    ("preflight_projection", ("text",), "expected the topology dict"),
    ("preflight_projection", ({"numa_nodes": [{"id": 0}]}, [], [{"size": "4K", "count": 1, "node": 0}]), "size '4K'"),
    ("preflight_report", ({"numa_nodes": [{"id": 0}]}, {"sriov_pfs": ["0000:81:00.0"]}), r"gpuvirt_sriov_pfs\[0\]"),
    ("preflight_stop_lines", ("PREFLIGHT FAILED", ["h1"]), "expected a preflight report"),
    ("preflight_report", ({"numa_nodes": [{"id": 0}]}, {}, None, None, None, {"plan": None}), "planned is what"),
])
def test_bad_input_names_it(name, args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS[name](*args)


def test_stop_lines_of_a_failed_report():
    topo = read_topology(BARE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    report = FILTERS["preflight_report"](topo, {"host": "lab", "require_iommu_enabled": True}, None, None, "")
    lines = FILTERS["preflight_stop_lines"](report, ["lab"], ["h0", "lab", "h2"], "/r/lab.json")
    assert lines[0] == "ROLLOUT STOPPED at the batch lab: preflight failed on lab"
    assert lines[1].startswith("  - iommu: present") and lines[-1] == "  report: /r/lab.json"
    assert "earlier batches, done: h0; later batches, not started: h2" in lines[-2]


def test_the_report_takes_preflight_plans_answer():
    # the planner's refusal, handed over as preflight_plan returns it, is the report's plan check
    topo = read_topology(BARE, gpu_ids=["1234:11e8"], nic_ids=["1b36:0010"])
    tenants = [{"name": "a", "vcpus": 1, "memory_mb": 64}]
    planned = {"plan": None, "error": "gpuvirt.tenancy.plan_tenants: tenants[0]: no such thing"}
    report = FILTERS["preflight_report"](topo, {"host": "lab", "tenants": tenants}, None, planned=planned)
    same = FILTERS["preflight_report"](topo, {"host": "lab", "tenants": tenants}, None, None, planned["error"])
    assert report == same
    assert "no such thing" in report["table"]
