# -*- coding: utf-8 -*-
"""An exact reference for the placement planner: the placement rules of docs/tenants.md as a
CP-SAT model (OR-Tools, a test-only dependency), written independently of the planner.

It answers, for a host model and tenants asking for counts, the most tenants that can be placed
NUMA-locally, then the most ``online`` ones among them, under the default policy (numa required,
emulator isolate, 2M pages) with ``reserved_cpus``, ``smt`` (whole_cores / threads) and
``pcie_affinity`` (require: each VF of a tenant with GPUs within ``pcie_affinity_level`` of one of
its GPUs). Rules modelled, device by device:

- CPUs: per node its cores with their online threads (a core with a reserved thread is not free
  under whole_cores); a tenant takes whole cores giving at least vCPUs + 1 threads, or that many threads;
- GPUs and VFs: per IOMMU group, all of it to one tenant on its node or to none; a tenant's groups
  add up to exactly the count it asks for; VFs of unknown node are not local to any;
- 2M pages from the node's pool;
- NVSwitch boards (``partitions``): a tenant's GPUs are exactly one Fabric Manager partition's;
- ``numa: required_vf_socket`` (the policy's or the tenant's): the tenant's VF groups from any node
  of its node's socket (the nodes whose CPUs have its CPUs' ``package_id``), the rest on its node.

Spanning (``numa: spread``, the policy's or the tenant's): such a tenant may take one guest cell on
each of several nodes, as placement/spread.py places it: each cell at least one vCPU and one page,
its vCPUs, pages and groups adding up to the tenant's, each GPU and VF group on its own node's cell,
the emulator thread (isolate) on one of its nodes. With ``cells=True`` the answer has a third
term: the fewest guest cells (a tenant on one node is one cell) among the plans with that count and
online count. The closest-set rule (NUMA distances) is not modelled: it picks among sets of the
same size, which these counts do not tell apart.
"""

from __future__ import annotations

from ortools.sat.python import cp_model

LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
SIZES_KB = {"2M": 2048, "1G": 1048576}


def _node(value):
    return value if isinstance(value, int) and value >= 0 else None


def _pools(topology):
    """(GPU units, VF units): lists of (node, [addresses]) by IOMMU group, and the VF -> PF map."""
    pci = topology["pci_devices"]
    gpus = dict((gpu["address"], _node(gpu.get("numa_node"))) for gpu in topology["gpus"])
    vf_pf, vfs = {}, {}
    for address, device in sorted(pci.items()):
        for vf in device.get("virtfns") or []:
            vf_pf[vf] = address
            node = _node((pci.get(vf) or {}).get("numa_node"))
            vfs[vf] = node if node is not None else _node(device.get("numa_node"))
    units = []
    for pool in (gpus, vfs):
        by_group = {}
        for address in sorted(pool):
            group = (pci.get(address) or {}).get("iommu_group")
            by_group.setdefault(address if group is None else group, []).append(address)
        found = []
        for members in by_group.values():
            nodes = set(pool[m] for m in members)
            if len(nodes) == 1 and None not in nodes:
                found.append((nodes.pop(), members))
        units.append(found)
    return units[0], units[1], vf_pf


def _rank(topology, gpu, vf, vf_pf, gpu_node, vf_node):
    row = topology.get("gpu_nic_affinity", {}).get(gpu, {})
    level = row.get(vf, row.get(vf_pf.get(vf)))
    if level is None:
        return LEVELS.index("SYS") if gpu_node != vf_node else len(LEVELS)
    return LEVELS.index(level) if level in LEVELS else len(LEVELS)


def _sockets(topology):
    """node -> the nodes of its socket (CPU package, the package_id of its CPUs), itself included."""
    package = dict((cpu["id"], cpu.get("package_id")) for cpu in topology["cpus"])
    socket = {}
    for node in topology["numa_nodes"]:
        found = set(package.get(cpu) for cpu in node["cpus"]) - {None}
        socket[node["id"]] = found.pop() if len(found) == 1 else ("node", node["id"])
    return dict((node, [other for other in socket if socket[other] == socket[node]]) for node in socket)


def optimum(topology, tenants, policy=None, seconds=20.0, cells=False, partitions=None):
    """-> (most tenants placed, most online ones at that count), proven optimal by CP-SAT; with
    ``cells``, (count, online, fewest guest cells at those). ``partitions`` (an NVSwitch board's
    Fabric Manager partitions, each a tuple of GPU addresses): a tenant asking for GPUs takes
    exactly the GPUs of one partition of that size, each GPU in at most one tenant's partition
    (GPUs each in an IOMMU group of their own)."""
    policy = dict(policy or {})
    spans = [tenant.get("numa", policy.get("numa")) == "spread" for tenant in tenants]
    # numa required_vf_socket: the tenant's VFs from any node of its node's socket
    on_socket = [tenant.get("numa", policy.get("numa")) == "required_vf_socket" for tenant in tenants]
    reserved = set(policy.get("reserved_cpus_set") or ())
    whole = policy.get("smt", "whole_cores") == "whole_cores"
    require = policy.get("pcie_affinity", "prefer") == "require"
    threshold = LEVELS.index(policy.get("pcie_affinity_level", "PXB"))
    nodes = [node["id"] for node in topology["numa_nodes"]]
    pages = dict((node["id"], node["hugepages"]["2048kB"]["total"]) for node in topology["numa_nodes"])
    online = [cpu for cpu in topology["cpus"] if cpu.get("online", True)]
    online_ids = set(cpu["id"] for cpu in online)
    cores = dict((node, {}) for node in nodes)  # node -> {threads per core: count}
    threads = dict((node, 0) for node in nodes)
    seen = set()
    for cpu in online:
        node = cpu["numa_node"]
        if cpu["id"] not in reserved:
            threads[node] += 1
        core = tuple(sorted(c for c in cpu["siblings"] if c in online_ids))
        if core in seen:
            continue
        seen.add(core)
        if not reserved.intersection(core):
            cores[node][len(core)] = cores[node].get(len(core), 0) + 1
    gpu_units, vf_units, vf_pf = _pools(topology)
    gpu_node = dict((a, n) for n, members in gpu_units for a in members)
    vf_node = dict((a, n) for n, members in vf_units for a in members)

    model = cp_model.CpModel()
    # x[t][n]: tenant t has a cell on node n; y[t]: t is placed; per cell its vCPUs v, pages p and
    # the emulator thread e (one-node tenants: one cell holding all of it)
    x = [[model.NewBoolVar("x%d_%d" % (t, n)) for n in nodes] for t in range(len(tenants))]
    y = [model.NewBoolVar("y%d" % t) for t in range(len(tenants))]
    v, p, e = {}, {}, {}
    for t, spec in enumerate(tenants):
        need_pages = -(-spec["memory_mb"] * 1024 // SIZES_KB["2M"])
        if spans[t]:
            model.Add(sum(x[t]) >= y[t])
            for i in range(len(nodes)):
                model.Add(x[t][i] <= y[t])
        else:
            model.Add(sum(x[t]) == y[t])
        for i, node in enumerate(nodes):
            v[t, i] = model.NewIntVar(0, spec["vcpus"], "v%d_%d" % (t, i))
            p[t, i] = model.NewIntVar(0, need_pages, "p%d_%d" % (t, i))
            e[t, i] = model.NewBoolVar("e%d_%d" % (t, i))
            model.Add(v[t, i] >= x[t][i])
            model.Add(v[t, i] <= spec["vcpus"] * x[t][i])
            model.Add(p[t, i] >= x[t][i])
            model.Add(p[t, i] <= need_pages * x[t][i])
            model.Add(e[t, i] <= x[t][i])
            if not spans[t] and (need_pages > pages[node] or (not whole and spec["vcpus"] + 1 > threads[node])):
                model.Add(x[t][i] == 0)
        model.Add(sum(v[t, i] for i in range(len(nodes))) == spec["vcpus"] * y[t])
        model.Add(sum(p[t, i] for i in range(len(nodes))) == need_pages * y[t])
        model.Add(sum(e[t, i] for i in range(len(nodes))) == y[t])
    taken_cores = {}
    for i, node in enumerate(nodes):
        model.Add(sum(p[k, i] for k in range(len(tenants))) <= pages[node])
        if whole:
            for size, count in cores[node].items():
                amounts = []
                for k in range(len(tenants)):
                    a = model.NewIntVar(0, count, "a%d_%d_%d" % (k, i, size))
                    model.Add(a <= count * x[k][i])
                    taken_cores[(k, i, size)] = a
                    amounts.append(a)
                model.Add(sum(amounts) <= count)
            for k, spec in enumerate(tenants):
                model.Add(sum(size * taken_cores[(k, i, size)] for size in cores[node]) >= v[k, i] + e[k, i])
        else:
            model.Add(sum(v[k, i] + e[k, i] for k in range(len(tenants))) <= threads[node])
    index = dict((node, i) for i, node in enumerate(nodes))
    sockets = _sockets(topology)
    # GPU groups one by one under require (which GPUs a VF is near matters), else by node and
    # size; VF groups by node, size and the GPU groups each of their VFs is near
    near_of = {}
    gpu_classes = {}
    for u, (node, members) in enumerate(gpu_units):
        gpu_classes.setdefault((node, len(members), u if require else None), []).append(u)
    gpu_class_of = dict((u, key) for key, found in gpu_classes.items() for u in found)
    vf_classes = {}
    for node, members in vf_units:
        near = tuple(frozenset(gpu_class_of[g] for g, (_n, gpus) in enumerate(gpu_units) if any(
            _rank(topology, gpu, vf, vf_pf, gpu_node[gpu], vf_node[vf]) <= threshold for gpu in gpus)) for vf in members) if require else ()
        key = (node, len(members), near)
        vf_classes[key] = vf_classes.get(key, 0) + 1
        near_of[key] = near
    takes = {}
    if partitions is not None:
        _partition_rule(model, tenants, partitions, gpu_node, x, y, index, spans)
    for classes, key in ((dict((k, len(v)) for k, v in gpu_classes.items()), "gpus"), (vf_classes, "vfs")):
        for k, spec in enumerate(tenants):
            want = spec.get(key, 0)
            if key == "gpus" and partitions is not None:
                continue
            amounts = []
            for c, ((node, size, _near), count) in enumerate(sorted(classes.items(), key=repr)):
                if not want or size > want:
                    continue
                n = model.NewIntVar(0, min(count, want // size), "%s%d_%d" % (key, k, c))
                if key == "vfs" and on_socket[k]:
                    model.Add(n <= count * sum(x[k][index[other]] for other in sockets[node]))
                else:
                    model.Add(n <= count * x[k][index[node]])
                takes.setdefault((key, c), []).append(n)
                takes[(key, k, (node, size, _near))] = n
                amounts.append(size * n)
            model.Add(sum(amounts) == want * y[k])
        for c, ((node, size, _near), count) in enumerate(sorted(classes.items(), key=repr)):
            if (key, c) in takes:
                model.Add(sum(takes[(key, c)]) <= count)
    if require:
        for k, spec in enumerate(tenants):
            if not spec.get("gpus") or not spec.get("vfs"):
                continue
            for vf_key, count in vf_classes.items():
                n = takes.get(("vfs", k, vf_key))
                if n is None:
                    continue
                for near in near_of[vf_key]:
                    model.Add(n <= count * sum(takes[("gpus", k, g)] for g in near if ("gpus", k, g) in takes))
    # lexicographic: the count, then the online count; then (cells), at that value, the fewest cells
    weight = len(tenants) + 1
    objective = sum((weight + (1 if spec.get("priority", "online") == "online" else 0)) * y[k] for k, spec in enumerate(tenants))
    model.Maximize(objective)
    solver = _solve(model, seconds, any(spans))
    value = int(round(solver.ObjectiveValue()))
    if not cells:
        return value // weight, value % weight
    model.Add(objective == value)
    model.Minimize(sum(sum(row) for row in x))
    solver = _solve(model, seconds, any(spans))
    return value // weight, value % weight, int(round(solver.ObjectiveValue()))


def _partition_rule(model, tenants, partitions, gpu_node, x, y, index, spans):
    """z[t, q]: tenant t takes partition q, whole, of the size it asks for, on its node (a
    spanning tenant: on the nodes of its cells); a GPU in one taken partition at most."""
    users = {}
    for t, spec in enumerate(tenants):
        want = spec.get("gpus", 0)
        if not want:
            continue
        chosen = []
        for q, members in enumerate(partitions):
            if len(members) != want or any(gpu not in gpu_node for gpu in members):
                continue
            z = model.NewBoolVar("z%d_%d" % (t, q))
            for node in set(gpu_node[gpu] for gpu in members):
                model.Add(z <= x[t][index[node]])
            if not spans[t] and len(set(gpu_node[gpu] for gpu in members)) > 1:
                model.Add(z == 0)
            chosen.append(z)
            for gpu in members:
                users.setdefault(gpu, []).append(z)
        model.Add(sum(chosen) == y[t])
    for found in users.values():
        model.Add(sum(found) <= 1)


def _solve(model, seconds, spanning):
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    if spanning:
        # the LP with every constraint: the bounds of the spanning splits come from it
        solver.parameters.linearization_level = 2
    solver.parameters.max_time_in_seconds = seconds
    status = solver.Solve(model)
    if status != cp_model.OPTIMAL:
        raise AssertionError("CP-SAT did not prove an optimum in %.0f s (status %s)" % (seconds, solver.StatusName(status)))
    return solver
