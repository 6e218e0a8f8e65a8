# -*- coding: utf-8 -*-
"""Checks of a placement plan that every planner test makes: the rules no plan may break."""

from __future__ import annotations

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import parse_cpulist


def assert_exclusive(topology, plan, policy=None):
    """No GPU, VF or CPU twice; hugepages within each node's pool; reserved CPUs untouched;
    whole cores not shared; vCPUs on the tenant's node under numa required; a tenant spanning
    nodes (``cells``): each cell's vCPUs, CPUs, devices and hugepages on its own node."""
    policy = policy or {}
    reserved = set(parse_cpulist(policy.get("reserved_cpus")))
    cpu_node = dict((c["id"], c["numa_node"]) for c in topology["cpus"])
    core = dict((c["id"], tuple(sorted(c["siblings"]))) for c in topology["cpus"])
    seen_gpus, seen_vfs, seen_cpus, core_owner = {}, {}, {}, {}
    pages = {}
    for name, place in plan["placements"].items():
        for gpu in place["gpus"]:
            assert gpu not in seen_gpus, "GPU %s given to %s and %s" % (gpu, seen_gpus[gpu], name)
            seen_gpus[gpu] = name
        for vf in place["vfs"]:
            assert vf not in seen_vfs, "VF %s given twice" % vf
            seen_vfs[vf] = name
        pins = [place["vcpu_pins"][str(i)] for i in range(place["vcpus"])]
        assert len(place["vcpu_pins"]) == place["vcpus"]
        assert len(set(pins)) == len(pins)
        used = set(pins) | set(place["emulator_cpus"] if policy.get("emulator", "isolate") == "isolate" else ())
        assert used <= set(place["cpus"])
        for cpu in place["cpus"]:
            assert cpu not in seen_cpus, "CPU %d given to %s and %s" % (cpu, seen_cpus[cpu], name)
            seen_cpus[cpu] = name
            assert cpu not in reserved
            assert cpu_node[cpu] in (place["numa_nodes"] if place.get("cells") else [place["numa_node"]])
            if policy.get("smt", "whole_cores") == "whole_cores":
                assert not set(core[cpu]) & reserved
                owner = core_owner.setdefault(core[cpu], name)
                assert owner == name, "core %s shared by %s and %s" % (core[cpu], owner, name)
        if policy.get("emulator", "isolate") == "isolate":
            assert not set(place["emulator_cpus"]) & set(pins)
            assert all(cpu_node[c] in (place["numa_nodes"] if place.get("cells") else [place["numa_node"]]) for c in place["emulator_cpus"])
        if place.get("cells"):
            assert_cells(topology, place, pages)
        elif place["hugepages"]:
            key = (place["hugepages"]["node"], place["hugepages"]["size"])
            pages[key] = pages.get(key, 0) + place["hugepages"]["count"]
            assert place["hugepages"]["count"] * place["hugepages"]["size_kb"] >= place["memory_mb"] * 1024
        if policy.get("numa", "required") == "required" and not place.get("cells"):
            assert place["local"]
            assert all(g["numa_node"] == place["numa_node"] for g in topology["gpus"] if g["address"] in place["gpus"])
        if policy.get("numa") == "required_vf_socket":
            # GPUs on the tenant's node, VFs on a node of its socket (the package_id of the nodes' CPUs)
            package = dict((c["numa_node"], c.get("package_id")) for c in topology["cpus"])
            assert all(g["numa_node"] == place["numa_node"] for g in topology["gpus"] if g["address"] in place["gpus"])
            assert all(package[topology["pci_devices"][vf]["numa_node"]] == package[place["numa_node"]] for vf in place["vfs"])
    for (node, size), count in pages.items():
        key = "2048kB" if size == "2M" else "1048576kB"
        total = [n for n in topology["numa_nodes"] if n["id"] == node][0]["hugepages"][key]["total"]
        assert count <= total


def assert_cells(topology, place, pages):
    """One cell per node of ``numa_nodes``; the cells hold vCPUs 0..n-1 once each, pinned on the
    cell's node; each GPU and VF on its cell's node; memory in the cells adds up to the tenant's,
    its hugepages (added to ``pages``) from each cell's node."""
    cpu_node = dict((c["id"], c["numa_node"]) for c in topology["cpus"])
    device_node = dict((g["address"], g["numa_node"]) for g in topology["gpus"])
    device_node.update((a, d.get("numa_node")) for a, d in topology["pci_devices"].items() if d.get("physfn"))
    cells = place["cells"]
    assert [cell["node"] for cell in cells] == place["numa_nodes"] and len(set(place["numa_nodes"])) == len(cells) > 1
    assert place["numa_node"] is None
    assert sorted(v for cell in cells for v in cell["vcpus"]) == list(range(place["vcpus"]))
    for cell in cells:
        assert cell["vcpus"], "a cell without vCPUs"
        assert all(cpu_node[place["vcpu_pins"][str(v)]] == cell["node"] for v in cell["vcpus"])
        assert all(cpu_node[cpu] == cell["node"] for cpu in cell["cpus"])
        assert all(device_node[a] == cell["node"] for a in cell["gpus"] + cell["vfs"])
        if place["hugepages"]:
            key = (cell["node"], place["hugepages"]["size"])
            pages[key] = pages.get(key, 0) + cell["hugepages"]
            assert cell["memory_kib"] == cell["hugepages"] * place["hugepages"]["size_kb"]
    assert sorted(a for cell in cells for a in cell["gpus"]) == sorted(place["gpus"])
    assert sorted(a for cell in cells for a in cell["vfs"]) == sorted(place["vfs"])
    assert sorted(c for cell in cells for c in cell["cpus"]) == sorted(place["cpus"])
    total = sum(cell["memory_kib"] for cell in cells)
    if place["hugepages"]:
        assert total == place["hugepages"]["count"] * place["hugepages"]["size_kb"] >= place["memory_mb"] * 1024
    else:
        assert total == place["memory_mb"] * 1024
