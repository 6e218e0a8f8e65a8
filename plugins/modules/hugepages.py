#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: hugepages
short_description: 2M and 1G hugepages per NUMA node, at runtime and at boot
description:
  - Sets the hugepage pool of each NUMA node; at runtime through
    C(/sys/devices/system/node/nodeN/hugepages/hugepages-<kB>kB/nr_hugepages), and at boot through
    the kernel args C(hugepagesz=) / C(hugepages=) for the sizes in O(at_boot).
  - The kernel may give fewer pages than asked (memory in use or fragmented). Each count is read
    back; by default a shortfall writes the previous counts back and fails, reporting what each
    node got, so nothing is left half-applied.
  - Boot-time counts are per node (C(hugepages=0:N,1:M)) on Linux 5.16 and later; older kernels
    only take a total, which they split evenly over the nodes, so there every node must be asked
    the same count.
  - Runtime counts can be kept across reboots by a systemd unit (O(persist)) that writes them
    again before C(libvirtd) starts; the module enables the units it writes (O(enable_units)).
  - Nodes, their memory and their pools come from the host model (C(host_topology_info)).
  - One call at a time per O(root) (an exclusive lock on the root directory, shared with M(gpuvirt.tenancy.iommu_grub));
    a second call waits and decides from what the first wrote; one that waits more than 300 seconds fails, changing nothing.
version_added: 0.1.0
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes.CHANGES_HOST
  - gpuvirt.tenancy.host
  - gpuvirt.tenancy.bootloader
attributes:
  diff_mode:
    details:
      - The diff shows the runtime counts, the units written and, with O(boot_config=grub), the GRUB defaults file.
options:
  pages:
    description:
      - Wanted pool per page size and node. Pools not listed are left as they are.
    type: list
    elements: dict
    required: true
    suboptions:
      size:
        description: Page size.
        type: str
        choices: ["2M", "1G"]
        required: true
      count:
        description: Number of pages on the node (on each node for V(all)).
        type: int
        required: true
      node:
        description: NUMA node number, or V(all) for the same count on every node.
        type: raw
        default: all
  at_boot:
    description:
      - Page sizes reserved at boot through kernel args instead of at runtime. 1G pages rarely
        allocate at runtime once memory is in use.
    type: list
    elements: str
    choices: ["2M", "1G"]
    default: ["1G"]
  runtime:
    description: Whether the sizes not in O(at_boot) are set now through sysfs.
    type: bool
    default: true
  persist:
    description:
      - Write a systemd unit (O(persist_unit)) that sets the runtime counts again at every boot,
        ordered before C(libvirtd.service) and C(virtqemud.service); O(enable_units) enables it.
    type: bool
    default: false
  enable_units:
    description:
      - Enable the units written (or kept) with O(persist=true), the O(persist_unit) and the C(.mount) units
        of O(mounts), so that systemd starts them at every boot.
      - A unit counts as enabled when its link in C(/etc/systemd/system/multi-user.target.wants/) exists
        (what C(systemctl enable) makes for C(WantedBy=multi-user.target)). On the running host
        (O(root=/)) the module runs C(systemctl daemon-reload) after writing a unit and C(systemctl enable)
        for each unit without its link; under another O(root) it makes the links itself.
      - V(false) leaves enabling to the caller.
    type: bool
    default: true
  persist_unit:
    description: Path of the systemd unit written with O(persist=true).
    type: path
    default: /etc/systemd/system/gpuvirt-hugepages.service
  mounts:
    description:
      - hugetlbfs mount points, one per page size (QEMU backs guest memory with files there).
        Mounted now when missing (C(mount -t hugetlbfs -o pagesize=SIZE)); with O(persist=true)
        also a systemd C(.mount) unit next to O(persist_unit), ordered before libvirtd.
      - A path that is already another mount, or a hugetlbfs mount of another page size, is refused.
    type: list
    elements: dict
    default: []
    suboptions:
      size:
        description: Page size of the mount.
        type: str
        choices: ["2M", "1G"]
        required: true
      path:
        description: Mount point, such as C(/dev/hugepages1G).
        type: path
        required: true
  allow_partial:
    description:
      - Keep what the kernel gives when it gives fewer pages than asked (a warning), instead of
        writing the previous counts back and failing.
    type: bool
    default: false
  boot_config:
    description:
      - V(grub) writes the boot-time args into O(grub_file) itself (as M(gpuvirt.tenancy.iommu_grub) does);
        O(grub_file), O(variable) and O(bootloader_update) apply only then.
      - V(none) only returns them as RV(boot_args), to hand to M(gpuvirt.tenancy.iommu_grub) O(gpuvirt.tenancy.iommu_grub#module:args)
        so that IOMMU and hugepage args land in one edit before one reboot.
    type: str
    choices: [grub, none]
    default: grub
notes:
  - Nothing is changed on a host where the pools, the units, their links and the mounts are already as asked,
    so a converged host costs one module call.
seealso:
  - module: gpuvirt.tenancy.iommu_grub
"""

EXAMPLES = r"""
- name: 512 x 2M pages on node 1 now and at every boot, 4 x 1G on each node from the next boot
  gpuvirt.tenancy.hugepages:
    pages:
      - size: 2M
        count: 512
        node: 1
      - size: 1G
        count: 4
        node: all
    persist: true
    mounts:
      - size: 1G
        path: /dev/hugepages1G
  register: pages

- name: Hand the boot-time args to iommu_grub, for one GRUB edit and one reboot
  gpuvirt.tenancy.hugepages:
    pages:
      - {size: 1G, count: 8, node: 0}
      - {size: 1G, count: 8, node: 1}
    boot_config: none
  register: hugepage_args

- name: One edit of the kernel command line
  gpuvirt.tenancy.iommu_grub:
    pre_bind_ids: [10de:2330]
    args: "{{ hugepage_args.boot_args }}"
"""

RETURN = r"""
pages:
  description: Per node and page size; pages requested, allocated (the pool now) and free.
  returned: always
  type: list
  elements: dict
  sample: [{"node": 1, "size": "2M", "requested": 512, "allocated": 512, "free": 512, "at_boot": false}]
boot_args:
  description: Kernel args for the O(at_boot) sizes, as M(gpuvirt.tenancy.iommu_grub) O(gpuvirt.tenancy.iommu_grub#module:args) items.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "hugepagesz", "value": "1G", "state": "present"}, {"name": "hugepages", "value": "0:4,1:4", "state": "present"}]
reboot_required:
  description: Whether the running kernel's command line lacks the boot-time args.
  returned: always
  type: bool
  sample: true
args_missing:
  description: Boot-time args the running kernel's command line lacks.
  returned: always
  type: list
  elements: str
  sample: ["hugepagesz=1G", "hugepages=0:16,1:16"]
args_unwanted:
  description: Args of the running kernel's command line that the boot-time change removes or replaces.
  returned: always
  type: list
  elements: str
  sample: []
persist_unit:
  description: The systemd unit path, with O(persist=true) and runtime pages.
  returned: always
  type: str
  sample: /etc/systemd/system/gpuvirt-hugepages.service
persist_unit_changed:
  description: Whether the unit was written (or would be, in check mode).
  returned: always
  type: bool
  sample: true
mounts:
  description: The O(mounts), each with whether it was mounted before this run.
  returned: always
  type: list
  elements: dict
  sample: [{"size": "1G", "path": "/dev/hugepages1G", "mounted": false}]
mount_units:
  description: The systemd mount units written (or kept) with O(persist=true).
  returned: always
  type: list
  elements: str
  sample: [/etc/systemd/system/dev-hugepages1G.mount]
units_enabled:
  description: The units this run enabled (in check mode, would enable) with O(enable_units=true); empty when all were.
  returned: always
  type: list
  elements: str
  sample: [gpuvirt-hugepages.service, dev-hugepages1G.mount]
shortfalls:
  description: Pools where the kernel gave another count than asked, with what it gave and what was written back.
  returned: always
  type: list
  elements: dict
  sample: [{"node": 1, "size": "2M", "requested": 4096, "allocated": 1800, "previous": 0, "restored_to": 0, "error": null}]
"""

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.runner import run_module
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import hugepages as hugepages_feature

MODULE_ARGS = hugepages_feature.MODULE_ARGS


def main(host=None):
    run_module(MODULE_ARGS, hugepages_feature.hugepages, host=host)


if __name__ == "__main__":
    main()
