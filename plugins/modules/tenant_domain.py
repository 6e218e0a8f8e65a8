#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tenant_domain
short_description: Define a tenant's libvirt domain with its GPUs and VFs passed through, and start it
version_added: 0.1.0
description:
  - Defines a libvirt domain for one tenant through libvirt-python; passes the GPUs and VFs through as PCI hostdevs (C(managed=no),
    the devices stay bound to vfio-pci by the host, see M(gpuvirt.tenancy.vfio_bind)); a VF that is a network function is passed as
    an C(interface type=hostdev) carrying O(mac) and O(vlan); file disks are virtio with C(io=threads).
  - When the domain exists, only what differs is changed (domain type, vCPU count, memory, hugepage backing, the PCI hostdevs,
    hostdev interfaces and file disks); every other element, including the guest PCI addresses libvirt assigned, is kept.
    Defining twice changes nothing.
  - CPU, emulator and NUMA memory pinning is done by M(gpuvirt.tenancy.numa_pin).
options:
  name:
    description: The domain name (the tenant name).
    type: str
    required: true
  uri:
    description: libvirt connection URI.
    type: str
    default: qemu:///system
  state:
    description: V(defined) defines the domain; V(running) also starts it when it is not running.
    type: str
    choices: [defined, running]
    default: defined
  domain_type:
    description: libvirt domain type, V(kvm) or V(qemu) (no hardware virtualisation, as in the lab).
    type: str
    default: kvm
  vcpus:
    description: Number of vCPUs.
    type: int
    required: true
  memory_mb:
    description: Guest memory in MiB (rounded up to whole hugepages when O(hugepage_size) is set).
    type: int
    required: true
  hugepage_size:
    description: Back the memory with hugepages of this size (V(2M), V(1G)); V(none) or unset for none.
    type: str
  gpus:
    description: PCI addresses of the GPUs to pass through.
    type: list
    elements: str
    default: []
  vfs:
    description: PCI addresses of the VFs to pass through.
    type: list
    elements: str
    default: []
  network_vfs:
    description: The VFs of O(vfs) that are network functions, passed as C(interface type=hostdev) with O(mac) and O(vlan).
    type: list
    elements: str
    default: []
  mac:
    description: MAC address of the network VF interfaces.
    type: str
  vlan:
    description: VLAN tag of the network VF interfaces.
    type: int
  disks:
    description: File disks, virtio with C(io=threads) and C(cache=none).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Image path on the host.
        type: str
        required: true
      format:
        description: Image format.
        type: str
        default: qcow2
      target:
        description: Guest device name; default V(vda), V(vdb), ... in order.
        type: str
  machine:
    description: Machine type (for example V(q35)); default the hypervisor's.
    type: str
  arch:
    description: Guest architecture.
    type: str
    default: x86_64
extends_documentation_fragment:
  - gpuvirt.tenancy.attributes
  - gpuvirt.tenancy.attributes.PLATFORM
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details: The persistent domain XML before and after.
  platform:
    platforms: posix
requirements:
  - libvirt-python (python3-libvirt) on the managed host
seealso:
  - module: gpuvirt.tenancy.numa_pin
author:
  - gpuvirt.tenancy maintainers (@gpuvirt)
"""

EXAMPLES = r"""
- name: Define tenant-a with the edu device and one NVMe VF, 2M hugepages, no disk
  gpuvirt.tenancy.tenant_domain:
    name: tenant-a
    domain_type: qemu
    vcpus: 1
    memory_mb: 64
    hugepage_size: 2M
    gpus: ["0000:82:00.0"]
    vfs: ["0000:81:00.1"]

- name: Define and start a GPU tenant with a ConnectX VF (MAC, VLAN) and a disk
  gpuvirt.tenancy.tenant_domain:
    name: tenant-b
    state: running
    vcpus: 16
    memory_mb: 65536
    hugepage_size: 1G
    gpus: ["0000:07:00.0"]
    vfs: ["0000:0c:00.2"]
    network_vfs: ["0000:0c:00.2"]
    mac: "52:54:00:00:00:0b"
    vlan: 100
    disks:
      - path: /var/lib/libvirt/images/tenant-b.qcow2
"""

RETURN = r"""
xml:
  description: The persistent domain XML after the change (as it would be, in check mode).
  returned: success
  type: str
created:
  description: Whether the domain was (or would be) newly defined.
  returned: success
  type: bool
defined:
  description: Whether the definition was (or would be) written.
  returned: success
  type: bool
started:
  description: Whether the domain was (or would be) started.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, StateError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt_domain import (
    LIBVIRT_IMPORT_ERROR, TenantDomain, TenantSpec, connect, missing_libvirt_message)


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "uri": {"type": "str", "default": "qemu:///system"},
            "state": {"type": "str", "default": "defined", "choices": ["defined", "running"]},
            "domain_type": {"type": "str", "default": "kvm"},
            "vcpus": {"type": "int", "required": True},
            "memory_mb": {"type": "int", "required": True},
            "hugepage_size": {"type": "str"},
            "gpus": {"type": "list", "elements": "str", "default": []},
            "vfs": {"type": "list", "elements": "str", "default": []},
            "network_vfs": {"type": "list", "elements": "str", "default": []},
            "mac": {"type": "str"},
            "vlan": {"type": "int"},
            "disks": {"type": "list", "elements": "dict", "default": [], "options": {
                "path": {"type": "str", "required": True},
                "format": {"type": "str", "default": "qcow2"},
                "target": {"type": "str"},
            }},
            "machine": {"type": "str"},
            "arch": {"type": "str", "default": "x86_64"},
        },
        supports_check_mode=True,
    )
    if LIBVIRT_IMPORT_ERROR:
        module.fail_json(msg=missing_libvirt_message(), exception=LIBVIRT_IMPORT_ERROR)
    params = module.params
    try:
        spec = TenantSpec(params)
        conn = connect(params["uri"])
        try:
            tenant = TenantDomain(conn, params["uri"], spec, params["state"])
            if tenant.changed and not module.check_mode:
                tenant.apply()
            result = {"changed": tenant.changed, "xml": tenant.after_text, "created": tenant.created,
                      "defined": tenant.define, "started": tenant.start}
            if module._diff:
                result["diff"] = tenant.diff()
        finally:
            conn.close()
    except (InputError, StateError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
