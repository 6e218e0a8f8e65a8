# -*- coding: utf-8 -*-
"""Reference answers for the placement planner, written independently of it.

``optimum_placed`` is a brute-force search: the largest number of tenants (any subset, any
order) that can be put NUMA-locally on the host, counting per node whole free cores, GPUs,
VFs and 2M/1G hugepages. It covers the policy the planner defaults to (numa required, smt
whole_cores, emulator isolate) with tenants asking for counts (no addresses) and no PCIe
requirement. Exponential: for small instances only.

``fits_on_some_node`` answers, for one tenant and what is left of the host, whether any node
can hold it: the completeness check for one planning step.

IOMMU groups: the GPUs of one group (``iommu_group`` of their PCI device) go to one tenant or to
none, so a node's GPUs are the sizes of its free groups, and a tenant asking for k GPUs takes a
set of whole groups of exactly k GPUs (every such set is tried).
"""

from __future__ import annotations

from itertools import combinations

SIZES_KB = {"2M": 2048, "1G": 1048576}


def node_capacity(topology, reserved=(), taken_cpus=(), taken_gpus=(), taken_vfs=(), pages_used=None):
    """{node: {"cores": [threads per free core], "gpus": n, "vfs": n, "pages": {size: n}}}."""
    reserved, taken_cpus = set(reserved), set(taken_cpus)
    pages_used = pages_used or {}
    caps = {}
    cores_seen = set()
    cpu_node = {}
    for cpu in topology["cpus"]:
        cpu_node[cpu["id"]] = cpu["numa_node"]
    for node in topology["numa_nodes"]:
        nid = node["id"]
        cores = []
        for cpu in topology["cpus"]:
            if cpu["numa_node"] != nid or not cpu.get("online", True):
                continue
            core = tuple(sorted(cpu["siblings"]))
            if core in cores_seen:
                continue
            cores_seen.add(core)
            if any(c in reserved or c in taken_cpus for c in core):
                continue
            cores.append(len(core))
        pages = {}
        for key, value in node["hugepages"].items():
            size = "2M" if key == "2048kB" else "1G"
            pages[size] = value["total"] - pages_used.get((nid, size), 0)
        caps[nid] = {"cores": sorted(cores, reverse=True), "gpus": 0, "vfs": 0, "pages": pages, "groups": ()}
    sizes = {}
    for gpu in topology["gpus"]:
        if gpu["address"] not in taken_gpus and gpu["numa_node"] in caps:
            caps[gpu["numa_node"]]["gpus"] += 1
            group = topology["pci_devices"].get(gpu["address"], {}).get("iommu_group")
            key = (gpu["numa_node"], gpu["address"] if group is None else group)
            sizes[key] = sizes.get(key, 0) + 1
    for (node, _group), size in sizes.items():
        caps[node]["groups"] = tuple(sorted(caps[node]["groups"] + (size,), reverse=True))
    for dev in topology["pci_devices"].values():
        for vf in dev.get("virtfns") or []:
            node = topology["pci_devices"].get(vf, {}).get("numa_node", dev.get("numa_node"))
            if vf not in taken_vfs and node in caps:
                caps[node]["vfs"] += 1
    return caps


def need(tenant):
    size = tenant.get("hugepage_size", "2M")
    pages = -(-tenant["memory_mb"] * 1024 // SIZES_KB[size])
    return {"threads": tenant["vcpus"] + 1, "gpus": tenant.get("gpus", 0), "vfs": tenant.get("vfs", 0), "size": size, "pages": pages}


def _cores_for(cores, threads):
    """Fewest whole cores (largest first) giving ``threads`` threads, or None."""
    total = 0
    for count, size in enumerate(cores, 1):
        total += size
        if total >= threads:
            return count
    return None


def _gpu_choices(groups, want):
    """The groups left after taking whole groups of exactly ``want`` GPUs, for each way to take them."""
    left = set()
    for count in range(len(groups) + 1):
        for chosen in combinations(range(len(groups)), count):
            if sum(groups[i] for i in chosen) == want:
                left.add(tuple(size for i, size in enumerate(groups) if i not in chosen))
    return sorted(left)


def _fits(cap, want):
    if cap["gpus"] < want["gpus"] or cap["vfs"] < want["vfs"] or not _gpu_choices(cap["groups"], want["gpus"]):
        return False
    if cap["pages"].get(want["size"], 0) < want["pages"]:
        return False
    return _cores_for(cap["cores"], want["threads"]) is not None


def _take(cap, want):
    """What the node has left after ``want``, one per way to take its GPUs."""
    cores = _cores_for(cap["cores"], want["threads"])
    out = []
    for groups in _gpu_choices(cap["groups"], want["gpus"]):
        new = {"cores": cap["cores"][cores:], "gpus": cap["gpus"] - want["gpus"], "vfs": cap["vfs"] - want["vfs"],
               "pages": dict(cap["pages"]), "groups": groups}
        new["pages"][want["size"]] -= want["pages"]
        out.append(new)
    return out


def fits_on_some_node(caps, tenant):
    want = need(tenant)
    return any(_fits(cap, want) for cap in caps.values())


def optimum_placed(topology, tenants, reserved=()):
    """Max number of tenants placeable NUMA-locally (brute force with a simple bound).

    Cores on one host here have the same number of threads, so taking the first free cores
    is as good as any choice of cores."""
    caps = node_capacity(topology, reserved)
    wants = [need(t) for t in tenants]
    best = [0]

    def search(index, placed, caps):
        if placed + (len(wants) - index) <= best[0]:
            return
        if index == len(wants):
            best[0] = max(best[0], placed)
            return
        seen = set()
        for nid in sorted(caps):
            cap = caps[nid]
            signature = (tuple(cap["cores"]), cap["gpus"], cap["vfs"], tuple(sorted(cap["pages"].items())), cap["groups"])
            if signature in seen or not _fits(cap, wants[index]):
                continue
            seen.add(signature)
            for left in _take(cap, wants[index]):
                new_caps = dict(caps)
                new_caps[nid] = left
                search(index + 1, placed + 1, new_caps)
        search(index + 1, placed, caps)

    search(0, 0, caps)
    return best[0]
