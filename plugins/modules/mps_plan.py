#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mps_plan
short_description: The GPUs the gpu_mps role runs an MPS daemon on, from nvidia-smi's answers
version_added: 0.2.0
description:
  - Reads the two nvidia-smi queries the role C(gpu_mps) registered - the GPUs
    (C(--query-gpu=index,pci.bus_id,name,compute_mode,mig.mode.current --format=csv,noheader)) and their processes
    (C(--query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader)) - and gives the GPUs the role acts on, the
    requested GPUs that cannot host a whole-GPU MPS daemon (MIG mode on, Prohibited, or Exclusive_Process held by another
    process), the indexes the host lacks, and those a start skips.
  - A GPU query that printed no GPU (nvidia-smi missing, or its driver not loaded) is RV(answered) false with a
    RV(message) saying why; the role then changes nothing.
  - First checks the inputs no argument spec type checks - O(gpus) V(all) or a list of indexes,
    O(active_thread_percentage) 1-100, O(pinned_memory_limit) like V(20G) - and fails naming every bad one.
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.attributes.CONTROLLER
options:
  query:
    description: The registered result of the GPU query (or its output).
    type: raw
    required: true
  apps:
    description: The registered result of the process query (or its output).
    type: raw
    default: ""
  gpus:
    description: The GPUs asked for - V(all) or a list of nvidia-smi indexes.
    type: raw
    default: all
  state:
    description: Whether the daemons are to run (V(started)) or stop (V(stopped) - conflicting GPUs are kept, none skipped).
    type: str
    default: started
  active_thread_percentage:
    description: The daemons' default active thread percentage, 1-100; unset when empty.
    type: raw
  pinned_memory_limit:
    description: The daemons' default pinned device memory limit per client, like V(20G); unset when empty.
    type: raw
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Check the inputs, pick the GPUs and find conflicts
  gpuvirt.tenancy.mps_plan:
    query: "{{ gpu_query }}"
    apps: "{{ gpu_apps }}"
    gpus: [0, 1]
    state: started
  register: mps
"""

RETURN = r"""
answered:
  description: Whether an NVIDIA GPU answered the query.
  returned: success
  type: bool
message:
  description: Why no NVIDIA GPU answered; empty when one did.
  returned: success
  type: str
gpus:
  description: Every GPU the query printed (C(index), C(bus_id), C(name), C(compute_mode), C(mig), as printed).
  returned: success
  type: list
  elements: dict
indexes:
  description: Their indexes.
  returned: success
  type: list
  elements: str
requested:
  description: The GPUs O(gpus) names.
  returned: success
  type: list
  elements: dict
missing:
  description: The indexes O(gpus) names that the host lacks.
  returned: success
  type: list
  elements: str
conflicts:
  description: The requested GPUs that cannot host a whole-GPU MPS daemon.
  returned: success
  type: list
  elements: dict
conflicts_text:
  description: Those GPUs as the role's refusal names them.
  returned: success
  type: str
skipped:
  description: The conflicting GPUs a start skips (none for a stop).
  returned: success
  type: list
  elements: dict
selected:
  description: The GPUs the role acts on.
  returned: success
  type: list
  elements: dict
"""
