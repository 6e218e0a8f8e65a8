# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the planner reports besides the placements (placement/planner.py): what each removed tenant's
domain held (``released``), what is left free per node, and the IOMMU groups that constrain the
plan. Pure.
"""

from __future__ import absolute_import, division, print_function

from itertools import filterfalse

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cpulist import parse_cpulist
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.existing import pinned_cpus
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.index import node_of

__metaclass__ = type


class PlanReport:
    """The Planner's report of a plan (a mixin: it needs ``host`` and ``reserved``)."""

    def _released(self, raw):
        """What a removed tenant's domain held, as the pools know it: its GPUs (they stay on
        vfio-pci for the next tenant) and its VFs with their PFs (whose MAC/VLAN get cleared)."""
        raw = raw if isinstance(raw, dict) else {}
        devices = [str(a).lower() for a in (raw.get("hostdevs") or list(raw.get("gpus") or []) + list(raw.get("vfs") or []))]
        vfs = [a for a in devices if a in self.host.vf_node]
        try:
            cpus = sorted(set(pinned_cpus(raw, self.host.cpu_bound))
                          | set(parse_cpulist(raw.get("emulator_cpus"), "existing emulator_cpus", self.host.cpu_bound)) - self.reserved)
        except InputError:
            cpus = []
        return {"gpus": [a for a in devices if a in self.host.gpu_node], "vfs": vfs,
                "vf_pfs": dict((vf, self.host.vf_pf.get(vf)) for vf in vfs),
                "other_devices": [a for a in devices if a not in self.host.gpu_node and a not in self.host.vf_node],
                "cpus": cpus, "numa_node": node_of(raw.get("numa_node")),
                "hugepages": dict(raw["hugepages"]) if isinstance(raw.get("hugepages"), dict) else raw.get("hugepages")}

    def _free(self, state):
        free = {}
        taken = self.reserved.union(state.cpu_owner)
        for node in self.host.nodes:
            free[str(node)] = {
                "cpus": list(filterfalse(taken.__contains__, self.host.node_cpus[node])),
                "gpus": list(state.free_gpus[node]),
                "vfs": list(state.free_vfs[node]),
                "hugepages": dict((size, total - state.hugepages_used.get(node, {}).get(size, 0))
                                  for size, total in sorted(self.host.hugepages.get(node, {}).items())),
            }
        return free

    def _group_report(self):
        """The IOMMU groups that constrain the plan: pool devices left out (with why), those that
        go to one tenant together, and the functions each takes along."""
        host = self.host
        return {"left_out": dict(sorted(host.left_out.items())),
                "shared": dict((a, list(unit)) for a, unit in sorted(host.units.items())),
                "companions": dict((a, list(c)) for a, c in sorted(host.companions.items()))}
