#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight_info
short_description: Read what a GPU host's BIOS and firmware give, for the preflight report
version_added: 0.1.0
description:
  - Reads the host model (the same C(topology) as M(gpuvirt.tenancy.host_topology_info)) and, for every
    ConnectX physical function, the firmware parameters C(SRIOV_EN) and C(NUM_OF_VFS) (Default, Current,
    Next Boot) with C(mlxconfig) (NVIDIA MFT) or C(mstconfig) (mstflint), in one call.
  - When neither tool is installed each ConnectX PF is reported with status C(tool not found); that is
    not a failure.
  - Changes nothing. The P(gpuvirt.tenancy.preflight#role) role turns the result into the per-host report
    with the action M(gpuvirt.tenancy.preflight_report).
  - Where the host is a captured tree on the controller (a preview, with a local connection whose Python is
    the one running ansible-playbook, without become or async, and O(root) other than V(/)), the module's
    code runs in the controller's process instead of a module process, with the same validation and the
    same result.
options:
  firmware_tool:
    description:
      - Tool for the ConnectX firmware query. V(auto) uses C(mlxconfig) when present, else C(mstconfig).
        V(none) skips the query.
    type: str
    choices: [auto, mlxconfig, mstconfig, none]
    default: auto
  libvirt:
    description:
      - The options of M(gpuvirt.tenancy.tenant_domain_info) (without
        O(gpuvirt.tenancy.tenant_domain_info#module:root), which is this module's); read the tenants' domains and, with
        O(gpuvirt.tenancy.tenant_domain_info#module:service), the libvirt service in this same call (RV(libvirt)), so that
        the host stages of a play need not read them again. Omitted or empty, libvirt is not read.
      - Validated as that module validates them. A libvirt that does not answer is not a failure here (see RV(libvirt)).
    type: dict
  stage_checks:
    description:
      - Host stages (V(boot), V(sriov_vfio), V(tenants), V(libvirt_mounts)), each mapped to the options of its module's
        call as this run would send them (V(boot) M(gpuvirt.tenancy.iommu_grub), V(sriov_vfio) M(gpuvirt.tenancy.vfio_bind),
        V(tenants) M(gpuvirt.tenancy.tenant_domain), V(libvirt_mounts) the libvirt host role's hugetlbfs mounts,
        M(gpuvirt.tenancy.hugepages) with C(mounts) only); each call runs here in check mode, in this same call, validated as its module
        validates it. Returned in RV(stage_checks); a stage whose options are exactly the ones checked, and whose check
        changes nothing, need not call its module (docs/ARCHITECTURE.md, section One call per stage).
      - A check that fails is reported in RV(stage_checks) and is not a failure here; the preflight report (action
        M(gpuvirt.tenancy.preflight_report), role C(preflight)) fails the host where the stage itself would give that refusal
        later in the run, naming the stage.
      - Omitted or empty, nothing is checked.
    type: dict
  record_reads:
    description:
      - Also return the reads this call made of the host, each with a digest of its answer (RV(host_reads)); the
        module's action sets it on a host, keeps the reads on the controller and, on the next run with the same
        options, makes them again with one command on the host instead of this call (see the notes).
    type: bool
    default: false
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.device_ids
attributes:
  action:
    support: full
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    details:
      - The whole call runs on the controller where the host is a captured tree there (a preview).
  platform:
    platforms: posix
requirements:
  - C(mlxconfig) (NVIDIA MFT) or C(mstconfig) (mstflint) on the host to read the ConnectX firmware; without
    them each ConnectX PF is reported as C(tool not found).
notes:
  - The firmware query (C(-e q)) only reads; it needs root and, under Secure Boot lockdown, a tool with
    kernel access. A failed query is reported per PF with its message.
  - On a host, the action keeps each run's reads of the host and its result on the controller, in
    C(~/.cache/gpuvirt.tenancy/gate) (C($XDG_CACHE_HOME) when set; the environment variable
    C(GPUVIRT_TENANCY_GATE_CACHE) names another directory, or V(off) for none), one file per inventory host, for the
    same collection code, ansible-core, options, check and diff mode, become and C(ansible_python_interpreter), with
    the Python the gate ran with. The next run makes those reads again with one command on the host, a
    standard-library program that carries only the code that reads the host, run by that Python with the program on
    stdin as a pipelined module is run (without a module's start). Where every answer is the one the last run had,
    that run's result is this run's (RV(host_reads.answered_from) is V(reads)); the gate's own call, which compiles
    every stage's checks on the host, is not made. Where any answer differs, the command fails, the Python is
    another, nothing is kept, or modules are not pipelined on the connection, the gate runs on the host as without
    the cache, and RV(host_reads.changed) names the reads that answered otherwise, or why they were not made again.
  - A run's reads are not kept (RV(host_reads.not_answerable) says why) when it read the host other than through the
    collection's host seam, read one thing two ways, or made a libvirt call that is no read. Reads whose raw answer
    changes by itself (the CPU clock in C(/proc/cpuinfo), C(MemFree), the routes' use counts, every process's open
    files, the SSH session's client port, address lifetimes) are read as the part the checks use.
seealso:
  - module: gpuvirt.tenancy.host_topology_info
  - module: gpuvirt.tenancy.mlx_rocev2
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the host model and the ConnectX firmware settings
  gpuvirt.tenancy.preflight_info:
    gpu_ids: "{{ gpuvirt_gpu_pci_ids }}"
  register: __preflight

- name: Show the SR-IOV firmware settings of each ConnectX PF
  ansible.builtin.debug:
    msg: "{{ item.key }}: {{ item.value.status }} {{ item.value.params }}"
  loop: "{{ __preflight.firmware | dict2items }}"

- name: Read the host model, the firmware and, in the same call, libvirt's service and the tenants' domains
  gpuvirt.tenancy.preflight_info:
    libvirt:
      names: "{{ gpuvirt_tenants | map(attribute='name') }}"
      service: {uefi: true}
  register: __preflight

- name: Read the host, and check the boot and tenants stages as the last run asked them
  gpuvirt.tenancy.preflight_info:
    stage_checks:
      boot: {}
      tenants: {uri: "qemu:///system"}
  register: __preflight

- name: Read a captured tree on the controller, without the firmware query
  gpuvirt.tenancy.preflight_info:
    root: /srv/captures/gpu-node-07
    firmware_tool: none
  delegate_to: localhost
"""

RETURN = r"""
topology:
  description: The host model, as M(gpuvirt.tenancy.host_topology_info) returns it.
  returned: always
  type: dict
  sample: {"numa_nodes": [0, 1], "gpus": [{"address": "0000:82:00.0", "numa_node": 1}]}
firmware:
  description:
    - ConnectX PF address -> C(status) (V(ok), V(tool not found) or V(error)), C(tool) (path or null), C(message)
      and C(params) (C(SRIOV_EN), C(NUM_OF_VFS) each with C(default), C(current), C(next) as the tool shows them).
    - Empty when the host has no ConnectX PF or O(firmware_tool=none).
  returned: always
  type: dict
  sample:
    "0000:81:00.0":
      status: ok
      tool: /usr/bin/mstconfig
      message: null
      params: {"SRIOV_EN": {"default": "False(0)", "current": "True(1)", "next": "True(1)"},
               "NUM_OF_VFS": {"default": "0", "current": "8", "next": "8"}}
libvirt:
  description:
    - With O(libvirt), the result of M(gpuvirt.tenancy.tenant_domain_info) (C(domains), C(foreign), C(domains_read),
      C(service), C(query)); empty without it.
    - When libvirt did not answer and O(libvirt) has no C(service), only C(domains_read) (false) and C(message), why.
  returned: always
  type: dict
  sample:
    domains: {tenant-a: {numa_node: 1, hostdevs: ["0000:82:00.0"], active: true}}
    foreign: {}
    domains_read: true
    service: {family: Debian, packages: [libvirt-daemon-system], missing: [], enabled: enabled, active: active, answers: true,
              message: null}
    query: {names: [tenant-a], foreign: true, uri: "qemu:///system", service: {name: libvirtd, packages: null, uefi: false}}
host_reads:
  description:
    - On a host (not a preview), how this result was made.
    - With O(record_reads) and no action between (the module called directly), C(records), C(digests), C(answerable),
      C(reasons) and C(python) instead - the reads themselves.
  returned: when the module runs on a host, or with O(record_reads)
  type: dict
  sample: {answered_from: reads, reads: 504, changed: [], not_answerable: []}
  contains:
    answered_from:
      description:
        - V(reads) - the last run's result, its reads made again on the host and each answering as then.
        - V(module) - this call ran on the host.
      type: str
      sample: reads
    reads:
      description: How many distinct reads of the host the gate made (and, with V(reads), were made again).
      type: int
      sample: 504
    changed:
      description: The reads that answered otherwise than at the last run (the first five), or why they were not made again.
      type: list
      elements: str
      sample: ["fs.read('/sys/bus/pci/devices/0000:81:00.0/sriov_numvfs')"]
    not_answerable:
      description: Why this run's reads are not kept for the next run; empty when they are.
      type: list
      elements: str
      sample: []
stage_checks:
  description:
    - With O(stage_checks), per stage asked for C(module), C(options) (as checked), C(changed) (whether the call would
      change anything), C(result) (the check's result, as the module returns it in check mode) and C(error) (why the
      check could not run); empty without it.
  returned: always
  type: dict
  sample:
    boot: {module: iommu_grub, options: {iommu: true, passthrough: true}, changed: false, error: null,
           result: {changed: false, reboot_required: false, args_missing: [], args_unwanted: []}}
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight import info

MODULE_ARGS = info.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, info.preflight_info, host=host)


if __name__ == "__main__":
    main()
