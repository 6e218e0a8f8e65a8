# -*- coding: utf-8 -*-
"""Plan a fleet of several host models, hosts of one model interleaved with the others, for the
instruction count of the planner's host index kept per model (placement/index_cache.py), with the
planner and the test models of the tree at sys.argv[1]: ``python benchmarks/fleet_models.py TREE
KIND HOSTS``. KIND ``mixed``: four models (the DGX A100-class model, it with 2 VFs per NIC, it with
half the 2M pages, a 4-node synthetic host) in turn; ``running``: the DGX model on every host, each
with another count of free 2M pages on node 0 (tenants running; a count the index does not read);
``distinct``: the DGX model on every host, each with another memory size (every host its own key).
Prints the tenants placed and a digest of the plans; run it under
``valgrind --tool=callgrind`` with HOSTS 1 and 41 and take (n41 - n1) / 40 per plan
(docs/benchmarks.md, "Placement"; the collection under .build/collections, as scripts/env.sh sets it).
"""

from __future__ import absolute_import, division, print_function

import hashlib
import json
import os
import random
import sys

TREE, KIND, HOSTS = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path[:0] = [os.path.join(TREE, "benchmarks")]
os.chdir(TREE)
import bench_planner as b  # noqa: E402  pylint: disable=import-error,wrong-import-position
from placement_topologies import dgx_a100, synthetic  # noqa: E402  pylint: disable=import-error,wrong-import-position

if KIND == "mixed":
    models = [dgx_a100, lambda: dgx_a100(vfs_per_nic=2), lambda: dgx_a100(pages_2m=8192),
              lambda: synthetic(4, [32, 32, 32, 32], 2, [2, 2, 0, 0], [4, 4, 4, 4], [8192] * 4)]
    hosts = [models[index % len(models)]() for index in range(HOSTS)]
elif KIND == "running":
    hosts = []
    for index in range(HOSTS):
        host = dgx_a100()
        pools = host["numa_nodes"][0]["hugepages"]
        size = next(iter(pools))
        pools[size] = dict(pools[size], free=index)
        hosts.append(host)
else:
    hosts = [dgx_a100(memory_mb=131072 - index) for index in range(HOSTS)]
mixes = [b.tenant_mix(random.Random(index), 16) for index in range(HOSTS)]
plans = [b.plan_tenants(host, tenants, b.POLICY) for host, tenants in zip(hosts, mixes)]
print(sum(len(plan["placements"]) for plan in plans),
      hashlib.sha256(json.dumps([plan["placements"] for plan in plans], sort_keys=True, default=str).encode()).hexdigest()[:16])
