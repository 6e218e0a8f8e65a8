# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's host index (placement/index.py ``HostIndex``) and NVSwitch board
(placement/partitions.py ``board_of``) built once per host model in one process: a fleet's hosts of
one model (one SKU, one firmware) read the same topology, and a process that plans many of them (a
fleet report, the planner benchmark) builds each model's index once.

The key is exact and cheap: the bytes ``marshal.dumps`` writes of the parts of the topology the
index and the board read (``INDEX_READS``; of the hugepage pools their totals only) and of the pools
(and GPU module IDs) asked for. The same
bytes load as the same values of the same types (an int is not a bool or a float, a list not a
tuple; Python's ``marshal`` documentation), so the same key gives the same index. A value
``marshal`` does not write (a str subclass, any other class) makes no key: that topology's index is
built for its plan alone, as without the cache. Never keyed by the topology's identity: a caller
may change its dict between plans, and hosts of one model hand in distinct dicts. The format
(marshal's current one) flags an object that more than one reference points to (CPython's
Python/marshal.c ``w_ref``), so two equal topologies whose strings are shared differently write
apart: each then gets an index of its own, never another's (format 2, which writes no flags, costs
about twice as much per plan). Hosts whose topologies are read alike (one JSON document each) write
alike.

A key's index is kept from its second plan on (a fleet whose hosts all differ writes each key
once: those plans build their own index, as without the cache, and pay only for the key), built
from ``marshal.loads`` of the key: a copy only the cache holds, so that no later change to the
caller's dict reaches it, and the caller's objects gain no reference (which would change how they
write). The index is only read after it is built; its PCIe rank rows fill in as they are asked,
the same for every plan. A plan holds none of the index's lists or dicts (tested:
placement/test_index_cache.py). Pure: no I/O.
"""

from __future__ import absolute_import, division, print_function

import marshal

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.partitions import board_of

__metaclass__ = type

# the top-level keys of the topology HostIndex (itself and through vocabulary/iommu_groups.py) and
# board_of read; a test records their reads of a topology and fails where they read any other
INDEX_READS = ("numa_nodes", "cpus", "pci_devices", "gpus", "gpu_nic_affinity", "iommu")

# the most host models kept; past it the oldest goes (a fleet of more models builds the others per plan)
MOST_MODELS = 16

# the keys seen once (an index is kept from a key's second plan on), the most of them kept
MOST_SEEN = 64

_MODELS = {}
_SEEN = {}
# the key and pair of the last plan given a kept pair: hosts of one model planned in a row compare their
# key with it (bytes equality, a length check and a memcmp) before the dict's lookup, which hashes the
# whole key anew for each plan (a new bytes object). Always one of _MODELS (a pair goes only when
# another is kept, which is then the last)
_LAST = []


def host_model(topology, gpu_pool=None, vf_pfs=None, host_devices=None, gpu_modules=None):
    """-> (``HostIndex(topology, gpu_pool, vf_pfs, host_devices)``, ``board_of(topology,
    gpu_modules)``): the pair built before for the same key where there is one. A bad topology,
    pool or ``gpu_modules`` raises common.InputError each time (a pair that raised is not kept)."""
    if not isinstance(topology, dict):
        return HostIndex(topology, gpu_pool, vf_pfs, host_devices), None
    reads = list(map(topology.get, INDEX_READS))
    nodes = reads[0]
    if nodes.__class__ is list:
        reads[0] = _totals(nodes)
    try:
        key = marshal.dumps((tuple(reads), gpu_pool, vf_pfs, host_devices, gpu_modules))
    except ValueError:
        return HostIndex(topology, gpu_pool, vf_pfs, host_devices), board_of(topology, gpu_modules)
    if _LAST and key == _LAST[0]:
        return _LAST[1]
    model = _MODELS.get(key)
    if model is None:
        if key not in _SEEN:
            # a key seen once: its plan builds its own (a fleet of hosts that all differ pays no copy)
            if len(_SEEN) >= MOST_SEEN:
                del _SEEN[next(iter(_SEEN))]
            _SEEN[key] = None
            return HostIndex(topology, gpu_pool, vf_pfs, host_devices), board_of(topology, gpu_modules)
        del _SEEN[key]
        reads, gpu_pool, vf_pfs, host_devices, gpu_modules = marshal.loads(key)
        # a key left out reads as None: HostIndex and board_of read each as ``topology.get(key) or ...``
        copy = dict(zip(INDEX_READS, reads))
        model = (HostIndex(copy, gpu_pool, vf_pfs, host_devices), board_of(copy, gpu_modules))
        if len(_MODELS) >= MOST_MODELS:
            del _MODELS[next(iter(_MODELS))]
        _MODELS[key] = model
    _LAST[:] = (key, model)
    return model


def _totals(nodes):
    """``numa_nodes`` with each hugepage pool's ``total`` only: a pool's ``free`` count changes with the
    tenants a host runs, and the index reads its total alone (``(pool or {}).get("total")``), so hosts of
    one model with other tenants running share a key. The nodes as they are where one of them or of
    their pools is no dict (then the index reads them as it reads them)."""
    out = []
    for node in nodes:
        if node.__class__ is not dict:
            return nodes
        pools = node.get("hugepages")
        if pools:
            if pools.__class__ is not dict:
                return nodes
            totals = {}
            for size, pool in pools.items():
                if pool.__class__ is not dict:
                    return nodes
                totals[size] = {"total": pool["total"]} if "total" in pool else {}
            node = dict(node, hugepages=totals)
        out.append(node)
    return out


def forget():
    """Drop every kept index and board, and the keys seen (tests)."""
    _MODELS.clear()
    _SEEN.clear()
    del _LAST[:]
