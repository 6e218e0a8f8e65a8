# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's host index (placement/index.py ``HostIndex``) built once per host model in one
process: a fleet's hosts of one model (one SKU, one firmware) read the same topology, and a process
that plans many of them (a fleet report, the planner benchmark) builds each model's index once.

The key is exact and cheap: the bytes ``marshal.dumps`` writes of the parts of the topology the
index reads (``INDEX_READS``) and of the pools it is asked for. The same bytes load as the same
values of the same types (an int is not a bool or a float, a list not a tuple; Python's
``marshal`` documentation), so the same key gives the same index. A value ``marshal`` does not
write (a str subclass, any other class) makes no key: that topology's index is built for its plan
alone, as without the cache. Never keyed by the topology's identity: a caller may change its dict
between plans, and hosts of one model hand in distinct dicts.

The index of a key is built from ``marshal.loads`` of the key, a copy only the cache holds, so
that no later change to the caller's topology reaches it. The index is only read after it is built
(its PCIe rank rows fill in as they are asked, the same for every plan); a plan holds none of its
lists or dicts (tested: placement/test_index_cache.py). Pure: no I/O.
"""

from __future__ import absolute_import, division, print_function

import marshal

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import HostIndex

__metaclass__ = type

# the top-level keys of the topology HostIndex reads (itself and through vocabulary/iommu_groups.py);
# a test reads HostIndex's reads of a topology and fails where it reads any other
INDEX_READS = ("numa_nodes", "cpus", "pci_devices", "gpus", "gpu_nic_affinity", "iommu")

# the most host models kept; past it the oldest goes (a fleet of more models builds the others per plan)
MOST_MODELS = 16

_INDEXES = {}


def host_index(topology, gpu_pool=None, vf_pfs=None, host_devices=None):
    """``HostIndex(topology, gpu_pool, vf_pfs, host_devices)``, the one built before for the same
    key where there is one. A bad topology or pool raises common.InputError each time (an index
    that raised is not kept)."""
    if not isinstance(topology, dict):
        return HostIndex(topology, gpu_pool, vf_pfs, host_devices)
    get = topology.get
    try:
        key = marshal.dumps((tuple(map(get, INDEX_READS)), gpu_pool, vf_pfs, host_devices))
    except ValueError:
        return HostIndex(topology, gpu_pool, vf_pfs, host_devices)
    index = _INDEXES.get(key)
    if index is None:
        reads, gpu_pool, vf_pfs, host_devices = marshal.loads(key)
        # a key left out reads as None: HostIndex reads each as ``topology.get(key) or ...``
        index = HostIndex(dict(zip(INDEX_READS, reads)), gpu_pool, vf_pfs, host_devices)
        if len(_INDEXES) >= MOST_MODELS:
            del _INDEXES[next(iter(_INDEXES))]
        _INDEXES[key] = index
    return index


def forget():
    """Drop every kept index (tests)."""
    _INDEXES.clear()
