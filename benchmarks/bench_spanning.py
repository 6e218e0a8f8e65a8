# -*- coding: utf-8 -*-
"""The placement planner under ``numa: spread`` against the exact CP-SAT reference extended to
spanning tenants (tests/unit/placement_cpsat.py, ``cells=True``) on the generated 2-, 4- and 8-node
family ``placement_families.spanning_mix``: per node count, the instances where the plan places
the optimum's count and online count, those where it also takes the fewest guest cells, those it
says are proven, those proven yet below the optimum (must be none), and the planner's CPU time.

usage: python3 benchmarks/bench_spanning.py [--seeds 2:20,4:20,8:12]
(the collection under .build/collections, as scripts/env.sh sets it; ortools from requirements.txt)
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
sys.path.insert(0, os.path.join(REPO, ".build", "collections"))

# pylint: disable=wrong-import-position,import-error
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants  # noqa: E402
import placement_cpsat  # noqa: E402
from placement_families import spanning_mix  # noqa: E402


def value(plan):
    placed = plan["placements"].values()
    return (len(placed), sum(1 for p in placed if p["priority"] == "online"),
            sum(len(p["cells"]) if p.get("cells") else 1 for p in placed))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--seeds", default="2:20,4:20,8:12", help="NODES:COUNT,... (the unit test's instances by default)")
    args = parser.parse_args()
    print("| nodes | instances | at the optimum (count, online) | and fewest cells | proven | proven below the optimum "
          "| planner CPU ms, median (most) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for part in args.seeds.split(","):
        nodes, count = (int(x) for x in part.split(":"))
        at = cells = proven = wrong = 0
        times = []
        for seed in range(count):
            topology, tenants, policy = spanning_mix(random.Random(seed * 31 + nodes), nodes)
            start = time.process_time()
            plan = plan_tenants(topology, tenants, policy)
            times.append((time.process_time() - start) * 1000)
            best = placement_cpsat.optimum(topology, tenants, policy, cells=True, seconds=120)
            got = value(plan)
            at += got[:2] == best[:2]
            cells += got == best
            proven += bool(plan["search"]["proven"])
            wrong += bool(plan["search"]["proven"]) and got[:2] != best[:2]
        print("| %d | %d | %d | %d | %d | %d | %.1f (%.1f) |" % (nodes, count, at, cells, proven, wrong, statistics.median(times), max(times)))


if __name__ == "__main__":
    main()
