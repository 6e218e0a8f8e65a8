#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_topology_info
short_description: Read a GPU host's topology (NUMA, CPUs, PCI tree, IOMMU, SR-IOV, GPUs, NICs)
version_added: 0.1.0
description:
  - Reads sysfs and procfs and returns the model of the host that the other modules of
    C(gpuvirt.tenancy) and the placement planner build on.
  - Reads everything under O(root), so it can also read a captured tree such as an unpacked
    sosreport or a test fixture.
  - Computes the GPU/NIC affinity level that C(nvidia-smi topo -m) would print (V(PIX),
    V(PXB), V(PHB), V(NODE), V(SYS)) from the PCI tree and NUMA nodes alone, without the
    NVIDIA driver.
  - Missing files, a V(-1) NUMA node, driverless devices, an absent IOMMU and devices that
    disappear while being read give null or empty values, never a failure.
options: {}
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.INFO_MODULE
  - gpuvirt.tenancy.attributes.PLATFORM
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.device_ids
notes:
  - Needs no root privileges; a few sysfs files (for example C(config)) are never read.
seealso:
  - name: nvidia-smi topo legend
    description: The meaning of the affinity levels.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Read the host model
  gpuvirt.tenancy.host_topology_info:
  register: host

- name: Show each GPU with its NUMA node
  ansible.builtin.debug:
    msg: "{{ item.address }} {{ item.model }} node {{ item.numa_node }}"
  loop: "{{ host.topology.gpus }}"

- name: Read a captured tree (for example an unpacked sosreport)
  gpuvirt.tenancy.host_topology_info:
    root: /srv/captures/gpu-node-07
  delegate_to: localhost

- name: Treat QEMU's edu device as a GPU (lab stand-in)
  gpuvirt.tenancy.host_topology_info:
    gpu_ids: ["1234:11e8"]
"""

RETURN = r"""
topology:
  description: The host model.
  returned: always
  type: dict
  contains:
    numa_nodes:
      description: NUMA nodes with C(id), C(cpus), C(memory_mb), C(hugepages) per size (C(total), C(free)) and C(distances).
      type: list
      elements: dict
      sample: [{"id": 1, "cpus": [2, 3], "memory_mb": 2015, "hugepages": {"2048kB": {"total": 64, "free": 64, "supported": true}}}]
    cpus:
      description: Logical CPUs with C(id), C(core_id), C(package_id), C(numa_node), C(siblings) and C(online).
      type: list
      elements: dict
      sample: [{"id": 0, "core_id": 0, "package_id": 0, "numa_node": 0, "siblings": [0, 32], "online": true}]
    pci_devices:
      description:
        - PCI functions keyed by full address, each with C(vendor_id), C(device_id), C(class), C(driver),
          C(driver_override), C(numa_node), C(iommu_group), C(sriov_totalvfs), C(sriov_numvfs),
          C(sriov_drivers_autoprobe), C(physfn), C(virtfns), C(vf_index), C(netdevs), C(rdma_devices),
          C(upstream) (bridges from the device up to its root port), C(root_bus), C(is_bridge), C(model).
      type: dict
      sample:
        0000:82:00.0:
          vendor_id: 10de
          device_id: '2330'
          class: '0x030200'
          driver: vfio-pci
          driver_override: vfio-pci
          numa_node: 1
          iommu_group: 41
    gpus:
      description: GPUs with C(address), C(model), C(vendor_id), C(device_id), C(numa_node), C(iommu_group), C(driver).
      type: list
      elements: dict
      sample:
        - address: 0000:82:00.0
          model: NVIDIA H100 SXM5 80GB
          vendor_id: 10de
          device_id: '2330'
          numa_node: 1
          iommu_group: 41
          driver: vfio-pci
    nics:
      description: Network controllers with the GPU keys plus C(netdevs), C(rdma_devices), C(sriov_totalvfs), C(sriov_numvfs), C(is_vf).
      type: list
      elements: dict
      sample:
        - address: 0000:81:00.0
          model: MT2910 Family [ConnectX-7]
          vendor_id: 15b3
          device_id: '1021'
          numa_node: 1
          iommu_group: 40
          driver: mlx5_core
          netdevs:
          - ens81f0np0
          rdma_devices:
          - mlx5_0
          sriov_totalvfs: 16
          sriov_numvfs: 4
    gpu_nic_affinity:
      description: For each GPU address, each NIC address and its level (V(PIX), V(PXB), V(PHB), V(NODE), V(SYS)).
      type: dict
      sample: {"0000:07:00.0": {"0000:0c:00.0": "PXB"}}
    iommu:
      description:
        - C(enabled) (IOMMU groups exist), C(units) (C(/sys/class/iommu) entries), C(firmware_table)
          (V(DMAR) or V(IVRS) when the ACPI table exists) and C(groups) (group number to device addresses).
      type: dict
      sample: {"enabled": true, "units": ["dmar0", "dmar1"], "firmware_table": "DMAR"}
    cmdline:
      description: The running kernel command line, one argument per item.
      type: list
      elements: str
      sample: ["BOOT_IMAGE=/boot/vmlinuz-6.1.0-18-amd64", "root=UUID=0f3a9d52-5c1e-4a54-9a53-0e2b1c7d8e41", "ro", "intel_iommu=on", "iommu=pt"]
    netdevs:
      description: Network interfaces with their C(pci_address), C(mac) and C(operstate).
      type: dict
      sample: {"ens81f0np0": {"pci_address": "0000:81:00.0", "mac": "b8:3f:d2:1a:2b:3c", "operstate": "up"}}
    boot_id:
      description: C(/proc/sys/kernel/random/boot_id); it changes at every boot.
      type: str
      sample: "3e6b2c1f-0a4d-4d5e-9f7a-2b8c6d1e0f93"
    kernel_release:
      description: The running kernel release.
      type: str
      sample: "6.1.0-18-amd64"
    cpu_vendor:
      description: V(intel), V(amd), or the raw vendor id.
      type: str
      sample: "intel"
    virtual_machine:
      description:
        - Null on bare metal; on a virtual machine (the C(hypervisor) flag in C(/proc/cpuinfo)) the hypervisor's name from
          C(/sys/class/dmi/id/sys_vendor), or V(unknown).
        - Preflight then names a virtual IOMMU as the fix for a missing IOMMU, not a BIOS setting.
      type: str
      sample: "QEMU"
    hypervisor:
      description:
        - libvirt's and QEMU's versions as a captured O(root) holds them (C(.capture/libvirtd-version.txt),
          C(.capture/qemu-version.txt), written by playbooks/files/capture_host.py), and whether it held any (C(captured)).
        - All null on the running host (O(root) V(/)), whose programs are not run here.
      type: dict
      sample: {"libvirt": "8.0.0", "qemu": "6.2.0", "captured": true}
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import topology_info

MODULE_ARGS = dict(
    argument_spec=dict(
        root=dict(type="path", default="/"),
        gpu_ids=dict(type="list", elements="str", default=[]),
        nic_ids=dict(type="list", elements="str", default=[]),
    ),
)


def main(host=None):
    run_module(MODULE_ARGS, topology_info, host=host)


if __name__ == "__main__":
    main()
