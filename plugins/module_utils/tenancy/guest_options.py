# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A tenant's guest options as ``tenant_domain`` takes them (``image``, ``cloud_init``, ``management``,
``data_nic``, ``guest_dir``): the argument spec alone, apart from their checks (guest_inputs.py), so
that a module's spec names them without importing the checks a tenant without a guest never runs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

GUEST_DIR = "/var/lib/libvirt/images/gpuvirt"

IMAGE_OPTIONS = dict(
    base=dict(type="path"),
    url=dict(type="str"),
    checksum=dict(type="str"),
    size_gb=dict(type="int"),
    copy=dict(type="bool", default=False),
)
CLOUD_INIT_OPTIONS = dict(
    user=dict(type="str", default="gpuvirt"),
    # public keys: nothing secret
    ssh_authorized_keys=dict(type="list", elements="str", default=[], no_log=False),
    packages=dict(type="list", elements="str", default=[]),
    hostname=dict(type="str"),
    rdma_address=dict(type="str"),
    # the service VM's (tenancy/fabric_vm): the Fabric Manager's FM_CMD_BIND_INTERFACE, set at the first boot
    fabric_manager_address=dict(type="str"),
)
MANAGEMENT_OPTIONS = dict(
    network=dict(type="str"),
    bridge=dict(type="str"),
    mac=dict(type="str"),
    address=dict(type="str"),
    gateway=dict(type="str"),
    dns=dict(type="list", elements="str", default=[]),
)
# A data NIC (virtio) on a libvirt network or a host bridge: the tenant's RDMA NIC (soft-RoCE in the
# guest) where it has no network VF, for hosts without SR-IOV NICs and tenants that need no VF.
DATA_NIC_OPTIONS = dict(
    network=dict(type="str"),
    bridge=dict(type="str"),
    mac=dict(type="str"),
    vlan=dict(type="int"),
)
# tenant_domain's options for a guest (each entry of ``domains`` too).
GUEST_OPTIONS = dict(
    image=dict(type="dict", options=IMAGE_OPTIONS),
    cloud_init=dict(type="dict", options=CLOUD_INIT_OPTIONS),
    management=dict(type="dict", options=MANAGEMENT_OPTIONS),
    data_nic=dict(type="dict", options=DATA_NIC_OPTIONS),
    guest_dir=dict(type="path", default=GUEST_DIR),
)
