#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""The work of the planner benchmark's fleet, for an instruction count: plans the first N mixes of
16 tenants of benchmarks/bench_planner.py's fleet on the DGX A100-class model (its own
definitions: tenant_mix, POLICY) and prints a SHA-256 of the plans (their JSON, keys sorted;
computed after the plans, so an instruction count of the plans alone leaves it out with --quiet).

Usage: benchmarks/plan_fleet.py N [--quiet]   (benchmarks/bench_instructions.sh runs it under valgrind)
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_planner  # noqa: E402  pylint: disable=wrong-import-position,import-error
from placement_topologies import dgx_a100  # noqa: E402  pylint: disable=wrong-import-position,import-error


def main():
    count = int(sys.argv[1])
    host = dgx_a100()
    mixes = [bench_planner.tenant_mix(random.Random(index), 16) for index in range(count)]
    plans = [bench_planner.plan_tenants(host, tenants, bench_planner.POLICY) for tenants in mixes]
    if "--quiet" not in sys.argv[2:]:
        digest = hashlib.sha256()
        for plan in plans:
            digest.update(json.dumps(plan, sort_keys=True).encode() + b"\n")
        print("plans of the first %d mixes: %s" % (count, digest.hexdigest()[:16]))


if __name__ == "__main__":
    main()
