#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Placement planner benchmark.

- planning time for one 8-GPU host (the DGX A100-class model of tests/unit/placement_topologies.py,
  built from real captures) with 1 to 16 tenants, and for 1,000 such hosts with 16 tenants each;
- tenants placed by the planner (best fit) against a first-fit baseline on that host, and against
  a brute-force optimum (tests/unit/placement_oracle.py) on small random hosts.

Usage: benchmarks/bench_placement.py [--write docs/benchmarks.md] [--hosts 1000] [--small 400]
Writes (or replaces) the section "## Placement" of the given Markdown file.
"""

from __future__ import annotations

import argparse
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
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement import plan_tenants  # noqa: E402
import placement_oracle as oracle  # noqa: E402
from placement_topologies import dgx_a100, synthetic  # noqa: E402

POLICY = {"reserved_cpus": "0-1,128-129"}


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


def timed(func, repeat):
    samples = []
    for _sample in range(repeat):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


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


def run(hosts, small):
    host = dgx_a100()
    rng = random.Random(7)
    lines = []
    lines.append("| tenants | median planning time (ms) | placed (best fit) | placed (first fit) "
                 "| GPU+VF tenants under one switch (best fit) | (first fit) |")
    lines.append("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for count in range(1, 17):
        tenants = tenant_mix(random.Random(1000 + count), count)
        median = timed(lambda t=tenants: plan_tenants(host, t, POLICY), 7)
        best = plan_tenants(host, tenants, POLICY)["placements"]
        first = plan_tenants(host, tenants, dict(POLICY, strategy="first_fit"))["placements"]
        lines.append("| %d | %.2f | %d | %d | %s | %s |" % (count, median * 1000, len(best), len(first), switch(best), switch(first)))
    start = time.perf_counter()
    placed = total = 0
    for index in range(hosts):
        tenants = tenant_mix(random.Random(index), 16)
        plan = plan_tenants(host, tenants, POLICY)
        placed += len(plan["placements"])
        total += len(tenants)
    fleet = time.perf_counter() - start
    fleet_first = 0
    for index in range(hosts):
        fleet_first += len(plan_tenants(host, tenant_mix(random.Random(index), 16), dict(POLICY, strategy="first_fit"))["placements"])

    # small random hosts against the brute-force optimum
    best_sum = first_sum = opt_sum = best_short = first_short = 0
    for index in range(small):
        r = random.Random(50000 + index)
        nodes = r.randint(2, 3)
        topo = synthetic(nodes, [r.randint(2, 6) for _node in range(nodes)], r.choice([1, 2]), [r.randint(0, 2) for _node in range(nodes)],
                         [r.randint(0, 3) for _node in range(nodes)], [r.choice([32, 64, 128]) for _node in range(nodes)])
        tenants = [{"name": "s%d" % i, "vcpus": r.randint(1, 5), "memory_mb": r.choice([32, 64, 128]), "gpus": r.randint(0, 1),
                    "vfs": r.randint(0, 2)} for i in range(r.randint(3, 7))]
        policy = {"pcie_affinity": "ignore"}
        best = len(plan_tenants(topo, tenants, policy)["placements"])
        first = len(plan_tenants(topo, tenants, dict(policy, strategy="first_fit"))["placements"])
        opt = oracle.optimum_placed(topo, tenants)
        best_sum, first_sum, opt_sum = best_sum + best, first_sum + first, opt_sum + opt
        best_short += best < opt
        first_short += first < opt
    return {"table": lines, "hosts": hosts, "fleet_s": fleet, "placed": placed, "total": total, "fleet_first": fleet_first,
            "small": small, "best_sum": best_sum, "first_sum": first_sum, "opt_sum": opt_sum, "best_short": best_short,
            "first_short": first_short}


def render(result, command):
    out = ["## Placement", ""]
    out.append("Planner: `plugins/module_utils/placement.py` (filter `gpuvirt.tenancy.plan_tenants`), policy defaults "
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
    out.append("%d hosts x 16 tenants planned in %.2f s (%.2f ms per host); %d of %d tenants placed (first fit: %d)."
               % (result["hosts"], result["fleet_s"], result["fleet_s"] * 1000 / max(result["hosts"], 1), result["placed"],
                  result["total"], result["fleet_first"]))
    out.append("")
    out.append("### Against the brute-force optimum (small hosts)")
    out.append("")
    out.append("%d random hosts of 2-3 nodes with 3-7 tenants each (pcie_affinity ignore; the optimum may pick any subset in any "
               "order, the planner keeps tenant order for stability):" % result["small"])
    out.append("")
    out.append("| | tenants placed | instances below the optimum |")
    out.append("| --- | ---: | ---: |")
    out.append("| brute-force optimum | %d | - |" % result["opt_sum"])
    out.append("| planner (best fit) | %d | %d |" % (result["best_sum"], result["best_short"]))
    out.append("| first fit | %d | %d |" % (result["first_sum"], result["first_short"]))
    out.append("")
    return "\n".join(out)


def write_section(path, section):
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    if not text.strip():
        text = "# Benchmarks\n\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == "## Placement"), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + section + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(new.rstrip("\n") + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", help="Markdown file whose '## Placement' section is (re)written")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--small", type=int, default=400)
    args = parser.parse_args()
    command = "benchmarks/bench_placement.py" + "".join(
        " --%s %s" % (k, v) for k, v in (("hosts", args.hosts), ("small", args.small)) if v is not None)
    if args.write:
        command += " --write %s" % args.write
    result = run(args.hosts, args.small)
    section = render(result, command)
    print(section)
    if args.write:
        write_section(args.write, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
