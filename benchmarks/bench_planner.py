#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Placement planner benchmark.

- planning time for one 8-GPU host (the DGX A100-class model of tests/unit/placement_topologies.py,
  built from real captures) with 1 to 16 tenants, and for 1,000 such hosts with 8 and with 16
  tenants each (median of 5 passes in one run, one process, so one core);
- the scaling table: 4 to 128 tenants on hosts of 2 to 16 NUMA nodes, 100 mixes per cell;
- the goals: 128 tenants on the DGX A100-class host in at most 50 ms median with the
  search budget spent on none of the mixes, and 1,000 hosts of 16 tenants in under 3 s of CPU;
  printed met or not, and by how much;
- a digest (SHA-256) of the plans of each family above, so that a change meant to make the planner
  faster can show its plans are byte for byte those of before (run it on both, compare the lines),
  and one of the plans without the search's node count, for a change to the search's bounds;
- tenants placed by the planner against the greedy in list order (the planner's first guess, what
  it did before the search) and first fit on that host, and against a brute-force optimum
  (tests/unit/placement_oracle.py) on small random hosts: instances below the optimum must be 0.

Usage: benchmarks/bench_planner.py [--write docs/benchmarks.md] [--hosts 1000] [--small 400] [--passes 5] [--scale-hosts 100]
(or scripts/bench.sh planner ...). Writes (or replaces) the section "## Placement" of the given
Markdown file.
"""

from __future__ import absolute_import, division, print_function

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
sys.path.insert(0, os.path.join(REPO, ".build", "collections"))

# pylint: disable=wrong-import-position,import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants  # noqa: E402
import placement_oracle as oracle  # noqa: E402
from markdown_section import write_section  # noqa: E402
from placement_families import switched_host  # noqa: E402
from placement_topologies import dgx_a100, synthetic  # noqa: E402

POLICY = {"reserved_cpus": "0-1,128-129"}
SCALE_TENANTS = (4, 8, 16, 32, 64, 128)
# the goals: 128 tenants on the 8-node (DGX A100-class) host, median ms and plans that spend the budget; 1,000 x 16 CPU s
GOAL_TENANTS, GOAL_MEDIAN_MS, GOAL_EXHAUSTED = 128, 50.0, 0
GOAL_FLEET_PER_HOST, GOAL_FLEET_CPU_S = 16, 3.0
SCALE_NODES = (2, 4, 8, 16)


def tenant_mix(rng, count):
    tenants = []
    for index in range(count):
        gpus = rng.choice([0, 1, 1, 1, 2])
        tenants.append({"name": "t%02d" % index, "gpus": gpus, "vfs": rng.choice([0, 1, 1, 2]) if gpus else rng.choice([0, 1]),
                        "vcpus": rng.choice([4, 8, 8, 12, 16, 24]), "memory_mb": rng.choice([8192, 16384, 32768])})
    return tenants


def switch(placements):
    """'k of n': tenants with GPUs and VFs whose VFs all sit under their GPUs' PCIe switch (PIX/PXB)."""
    both = [p for p in placements.values() if p["gpus"] and p["vfs"]]
    return "%d of %d" % (sum(1 for p in both if p["pcie_affinity"] in ("PIX", "PXB")), len(both))


class Digest:
    """Two SHA-256 per family of the plans made (their JSON, keys sorted): of the whole plans, and
    of the plans without the search's node count (a change to the search's bounds changes how many
    nodes it takes, not which plan it finds)."""

    def __init__(self):
        self.families = {}

    def add(self, family, plan):
        whole, placed = self.families.setdefault(family, (hashlib.sha256(), hashlib.sha256()))
        whole.update(json.dumps(plan, sort_keys=True).encode() + b"\n")
        search = dict(plan["search"])
        search.pop("nodes", None)
        placed.update(json.dumps(dict(plan, search=search), sort_keys=True).encode() + b"\n")

    def lines(self):
        return ["| %s | `%s` | `%s` |" % (family, whole.hexdigest()[:16], placed.hexdigest()[:16])
                for family, (whole, placed) in sorted(self.families.items())]


def timed(func, repeat):
    """Median wall time of ``repeat`` calls (use timed_cpu on a shared machine)."""
    return timed_cpu(func, repeat)[0]


def timed_cpu(func, repeat):
    """(median wall seconds, median CPU seconds of this process) of ``repeat`` calls: the CPU
    time is what one core spends, whatever else the machine runs."""
    walls, cpus = [], []
    for _sample in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        func()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - start_cpu)
    return statistics.median(walls), statistics.median(cpus)


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d CPUs visible, Python %s, %s" % (cpu, os.cpu_count() or 0, platform.python_version(), platform.platform())


def dgx_like(nodes):
    """A DGX-class host of ``nodes`` NUMA nodes: 16 cores in SMT pairs and 32 GiB of 2M pages
    each, and on every other node a PCIe switch with 2 GPUs and 2 NICs of 4 VFs."""
    return switched_host([{"cores": 16, "switches": [{"groups": [1, 1], "nics": 2}] if node % 2 else []} for node in range(nodes)],
                         pages=16384)


def scaling_table(hosts, digest):
    """Per tenant count and NUMA node count: the median and the most CPU time of a plan over
    ``hosts`` mixes, and how many plans spent the search budget (then not proven) -> (lines, {(nodes, count): row})."""
    rows = {}
    for nodes in SCALE_NODES:
        topology = dgx_a100() if nodes == 8 else dgx_like(nodes)
        policy = POLICY if nodes == 8 else {}
        for count in SCALE_TENANTS:
            cpu, exhausted = [], 0
            for index in range(hosts):
                tenants = tenant_mix(random.Random(100000 * count + index), count)
                start = time.process_time()
                plan = plan_tenants(topology, tenants, policy)
                cpu.append(time.process_time() - start)
                exhausted += plan["search"]["exhausted"]
                digest.add("scaling %d nodes" % nodes, plan)
            rows[(nodes, count)] = (statistics.median(cpu), max(cpu), exhausted)
    lines = ["| tenants | " + " | ".join("%d nodes: median / most ms (budget spent)" % nodes for nodes in SCALE_NODES) + " |",
             "| ---: |" + " ---: |" * len(SCALE_NODES)]
    for count in SCALE_TENANTS:
        cells = ["%.1f / %.0f (%d)" % (rows[(nodes, count)][0] * 1000, rows[(nodes, count)][1] * 1000, rows[(nodes, count)][2])
                 for nodes in SCALE_NODES]
        lines.append("| %d | %s |" % (count, " | ".join(cells)))
    return lines, rows


def run(hosts, small, passes, scale_hosts=100):
    host = dgx_a100()
    digest = Digest()
    rng = random.Random(7)
    lines = []
    lines.append("| tenants | median planning time (ms) | placed (planner) | placed (first fit) "
                 "| GPU+VF tenants under one switch (planner) | (first fit) |")
    lines.append("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for count in range(1, 17):  # one host, a growing mix
        tenants = tenant_mix(random.Random(1000 + count), count)
        median = timed(lambda t=tenants: plan_tenants(host, t, POLICY), 7)
        plan = plan_tenants(host, tenants, POLICY)
        digest.add("one host, 1 to 16 tenants", plan)
        best = plan["placements"]
        first = plan_tenants(host, tenants, dict(POLICY, strategy="first_fit"))["placements"]
        lines.append("| %d | %.2f | %d | %d | %s | %s |" % (count, median * 1000, len(best), len(first), switch(best), switch(first)))
    fleets = {}
    for per_host in (8, 16):
        mixes = [tenant_mix(random.Random(index), per_host) for index in range(hosts)]
        plans = []

        def fleet():  # called in this iteration: the loop variables are this host count's
            del plans[:]
            plans.extend(plan_tenants(host, tenants, POLICY) for tenants in mixes)
        median, median_cpu = timed_cpu(fleet, passes)
        for plan in plans:
            digest.add("%d hosts of %d tenants" % (hosts, per_host), plan)
        greedy = sum(len(plan_tenants(host, tenants, dict(POLICY, search_budget=1))["placements"]) for tenants in mixes)
        first = sum(len(plan_tenants(host, tenants, dict(POLICY, strategy="first_fit"))["placements"]) for tenants in mixes)
        fleets[per_host] = {"seconds": median, "cpu_seconds": median_cpu, "passes": passes,
                            "placed": sum(len(p["placements"]) for p in plans), "total": per_host * hosts,
                            "greedy": greedy, "first": first, "exhausted": sum(1 for p in plans if p["search"]["exhausted"]),
                            "nodes": statistics.median(p["search"]["nodes"] for p in plans),
                            "searched": sum(1 for p in plans if p["search"]["nodes"]),
                            "most_nodes": max(p["search"]["nodes"] for p in plans)}

    scaling, scaling_rows = scaling_table(scale_hosts, digest)

    # small random hosts against the brute-force optimum
    best_sum = greedy_sum = first_sum = opt_sum = best_short = greedy_short = first_short = 0
    for index in range(small):
        r = random.Random(50000 + index)
        nodes = r.randint(2, 3)
        topo = synthetic(nodes, [r.randint(2, 6) for _node in range(nodes)], r.choice([1, 2]), [r.randint(0, 2) for _node in range(nodes)],
                         [r.randint(0, 3) for _node in range(nodes)], [r.choice([32, 64, 128]) for _node in range(nodes)])
        tenants = [{"name": "s%d" % i, "vcpus": r.randint(1, 5), "memory_mb": r.choice([32, 64, 128]), "gpus": r.randint(0, 1),
                    "vfs": r.randint(0, 2)} for i in range(r.randint(3, 7))]
        policy = {"pcie_affinity": "ignore"}
        plan = plan_tenants(topo, tenants, policy)
        digest.add("small hosts against brute force", plan)
        best = len(plan["placements"])
        greedy = len(plan_tenants(topo, tenants, dict(policy, search_budget=1))["placements"])
        first = len(plan_tenants(topo, tenants, dict(policy, strategy="first_fit"))["placements"])
        opt = oracle.optimum_placed(topo, tenants)
        best_sum, greedy_sum, first_sum, opt_sum = best_sum + best, greedy_sum + greedy, first_sum + first, opt_sum + opt
        best_short += best < opt
        greedy_short += greedy < opt
        first_short += first < opt
    return {"table": lines, "hosts": hosts, "passes": passes, "fleets": fleets, "small": small, "best_sum": best_sum,
            "greedy_sum": greedy_sum, "first_sum": first_sum, "opt_sum": opt_sum, "best_short": best_short,
            "greedy_short": greedy_short, "first_short": first_short, "scaling": scaling, "scale_hosts": scale_hosts,
            "goals": goals(scaling_rows, fleets, hosts, scale_hosts), "digest": digest.lines()}


def goals(rows, fleets, hosts, scale_hosts):
    """The goals' table lines: each measure, its goal, and met or by how much not."""
    lines = ["| goal | measured | met |", "| --- | --- | --- |"]
    median, _most, exhausted = rows.get((8, GOAL_TENANTS), (None, None, None))
    if median is not None:
        ms = median * 1000
        lines.append("| %d tenants on the 8-node host: median at most %.0f ms | %.1f ms | %s |" % (
            GOAL_TENANTS, GOAL_MEDIAN_MS, ms, "yes" if ms <= GOAL_MEDIAN_MS else "no: %.1f ms (%.0f%%) over" % (
                ms - GOAL_MEDIAN_MS, 100 * (ms - GOAL_MEDIAN_MS) / GOAL_MEDIAN_MS)))
        lines.append("| %d tenants on the 8-node host: search budget spent on %d of %d mixes | %d | %s |" % (
            GOAL_TENANTS, GOAL_EXHAUSTED, scale_hosts, exhausted, "yes" if exhausted <= GOAL_EXHAUSTED else "no: %d over" % (
                exhausted - GOAL_EXHAUSTED)))
    fleet = fleets.get(GOAL_FLEET_PER_HOST)
    if fleet is not None:
        # the goal is of 1,000 hosts: scaled when the run has another count
        cpu = fleet["cpu_seconds"] * 1000.0 / max(hosts, 1)
        lines.append("| 1,000 hosts of %d tenants: under %.0f s of CPU%s | %.2f s | %s |" % (
            GOAL_FLEET_PER_HOST, GOAL_FLEET_CPU_S, "" if hosts == 1000 else " (%d hosts, scaled)" % hosts, cpu,
            "yes" if cpu < GOAL_FLEET_CPU_S else "no: %.2f s (%.0f%%) over" % (cpu - GOAL_FLEET_CPU_S, 100 * (cpu - GOAL_FLEET_CPU_S) / GOAL_FLEET_CPU_S)))
    return lines


def render(result, command):
    out = ["## Placement", ""]
    out.append("Planner: `plugins/module_utils/placement/planner.py` (filter `gpuvirt.tenancy.plan_tenants`), policy defaults "
               "(numa required, smt whole_cores, emulator isolate, pcie_affinity prefer) with reserved CPUs `0-1,128-129`.")
    out.append("Host: the DGX A100-class model built from the real `nvidia-smi topo -m` and `lscpu` captures in tests/fixtures "
               "(8 GPUs, 10 NICs with 4 VFs each, 8 NUMA nodes NPS4, 256 CPUs in SMT pairs, 16384 x 2M pages per node).")
    out.append("Tenants: a fixed pseudo-random mix (0-2 GPUs, 0-2 VFs, 4-24 vCPUs, 8-32 GiB).")
    out.append("")
    out.append("Machine: %s." % machine())
    out.append("")
    out.append("Command: `%s`" % command)
    out.append("")
    out.append("### One 8-GPU host, 1 to 16 tenants")
    out.append("")
    out.extend(result["table"])
    out.append("")
    out.append("### %d hosts" % result["hosts"])
    out.append("")
    out.append("One process (one core); CPU time is the process's own (time.process_time), wall time what the clock "
               "saw on this shared machine; the median of the passes. The greedy is the planner's first guess (each tenant "
               "in list order on its best node), what it placed before the search; the search runs only where no bound proves "
               "the greedy best (hosts searched), and its nodes are counted there (0 elsewhere).")
    out.append("")
    out.append("| tenants per host | passes | CPU time (s) | wall time (s) | CPU per host (ms) | placed | placed by the greedy "
               "| placed by first fit | hosts searched | search nodes (median / most) | budget spent |")
    out.append("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for per_host, fleet in sorted(result["fleets"].items()):
        out.append("| %d | %d | %.2f | %.2f | %.2f | %d of %d | %d | %d | %d | %d / %d | %d |" % (
            per_host, fleet["passes"], fleet["cpu_seconds"], fleet["seconds"], fleet["cpu_seconds"] * 1000 / max(result["hosts"], 1),
            fleet["placed"], fleet["total"],
            fleet["greedy"], fleet["first"], fleet["searched"], fleet["nodes"], fleet["most_nodes"], fleet["exhausted"]))
    out.append("")
    out.append("### Scaling: 4 to 128 tenants, 2 to 16 NUMA nodes")
    out.append("")
    out.append("CPU time of one plan (time.process_time, one process), median and most over %d tenant mixes per cell "
               "(the mix above); in brackets the plans whose search spent its budget (20,000 nodes; the plan then "
               "keeps the best found, never below the greedy, and says it is not proven). 8 nodes: the DGX A100-class "
               "model with reserved CPUs `0-1,128-129`; 2, 4 and 16 nodes: a DGX-class model (16 cores in SMT pairs and "
               "32 GiB of 2M pages per node, on every other node a switch with 2 GPUs and 2 NICs of 4 VFs)." % result["scale_hosts"])
    out.append("")
    out.extend(result["scaling"])
    out.append("")
    out.append("### Goals")
    out.append("")
    out.extend(result["goals"])
    out.append("")
    out.append("### Against the brute-force optimum (small hosts)")
    out.append("")
    out.append("%d random hosts of 2-3 nodes with 3-7 tenants each (pcie_affinity ignore; the optimum may pick any subset "
               "in any order):" % result["small"])
    out.append("")
    out.append("| | instances | tenants placed | placed by brute force | instances below the optimum |")
    out.append("| --- | ---: | ---: | ---: | ---: |")
    for label, placed, short in (("planner", result["best_sum"], result["best_short"]),
                                 ("greedy in list order (before the search)", result["greedy_sum"], result["greedy_short"]),
                                 ("first fit", result["first_sum"], result["first_short"])):
        out.append("| %s | %d | %d | %d | %d |" % (label, result["small"], placed, result["opt_sum"], short))
    out.append("")
    out.append("### Plans made")
    out.append("")
    out.append("A SHA-256 (its first 16 hex digits) of the plans of each family above, their JSON with the keys sorted: the same "
               "digests from two revisions mean the same plans, byte for byte. The second is of the plans without the search's "
               "node count (`search.nodes`): the same there and not in the first means the same placements, reasons and "
               "proofs found with another number of search nodes.")
    out.append("")
    out.append("| family | plans' digest | without the search's node count |")
    out.append("| --- | --- | --- |")
    out.extend(result["digest"])
    out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", help="Markdown file whose '## Placement' section is (re)written")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--small", type=int, default=400)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--scale-hosts", type=int, default=100, help="tenant mixes per cell of the scaling table")
    args = parser.parse_args()
    command = "scripts/bench.sh planner" + "".join(
        " --%s %s" % (k, v) for k, v in (("hosts", args.hosts), ("small", args.small), ("passes", args.passes),
                                         ("scale-hosts", args.scale_hosts)) if v is not None)
    if args.write:
        command += " --write %s" % args.write
    result = run(args.hosts, args.small, args.passes, args.scale_hosts)
    section = render(result, command)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
