# -*- coding: utf-8 -*-
"""A tenant list with guests, as the inventory gives it (gpuvirt_tenants), and the guests' access
(gpuvirt_tenant_guest_access): for the tests of the guest options (tenant_plan.guest_domains) and of
the guest inventory built from them (plugin_utils guest_inventory)."""

from __future__ import annotations

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGd3b3JrZXhhbXBsZWtleWZvcnRlc3RzMDAwMDAwMDAw ops@example"
SIZE = {"vcpus": 2, "memory_mb": 1024}
# a guest with a VLAN, an RDMA address and packages; one with a MAC and an image by URL; one only
# defined; one without a guest
TENANTS = [dict(SIZE, **tenant) for tenant in [
    {"name": "tenant-a", "state": "running", "vlan": 101, "image": {"base": "/srv/debian-12.qcow2", "size_gb": 40},
     "guest": {"address": "192.168.150.11/24", "rdma_address": "10.20.0.11/24", "packages": ["numactl"]}},
    {"name": "tenant-b", "state": "running", "mac": "52:54:00:00:00:0B", "image": {"url": "https://x/y.qcow2", "checksum": "sha256:ab"},
     "guest": {"address": "192.168.150.12/24"}},
    {"name": "tenant-c", "state": "defined", "image": {"base": "/srv/debian-12.qcow2"}, "guest": {"address": "192.168.150.13/24"}},
    {"name": "tenant-d", "state": "running"},
]]
ACCESS = {"user": "ops", "ssh_authorized_keys": [KEY],
          "management": {"network": "gpuvirt-mgmt", "gateway": "192.168.150.1", "dns": ["192.168.150.1"]}}
