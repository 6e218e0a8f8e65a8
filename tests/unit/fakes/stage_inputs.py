# -*- coding: utf-8 -*-
"""A stage role's inputs as the role hands them to its call (the role's variables without the
prefix, every one given), for the tests of the mapping and of the actions that take it."""

from __future__ import annotations

# tenant_vms (roles/tenant_vms/vars/main.yml __tenant_vms_inputs), its defaults with one tenant
TENANT_VMS = {"tenants": [{"name": "a", "vcpus": 1, "memory_mb": 64}], "policy": {"numa": "required"}, "gpus": None, "vf_pfs": [],
              "domain_type": "kvm", "machine": "q35", "firmware": "efi", "memory_mode": "strict", "live": True,
              "priorities": {"online": {"cpu_shares": 1024}, "batch": {"cpu_shares": 256}}, "guest_access": {},
              "shutdown_timeout": 120, "force_off": False, "vf_persist": True, "gpu_ids": [], "nic_ids": [], "fabric_vm": {},
              "preview": False, "fabric_manager": None,
              "preview_wanted": {"sriov_pfs": [{"pf": "0000:19:00.0", "num_vfs": 4}], "hugepages": [], "gpus": []}}
