# -*- coding: utf-8 -*-
"""Tenant names by libvirt's rules, checked where they first arrive (the planner), and the
virtio disk names of tenant_domain without a limit."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.domain_name import check_domain_name
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.placement.planner import plan_tenants
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.tenant_spec import virtio_disk_target


@pytest.mark.parametrize("name", ["tenant-a", "t1", "a.b_c-d", "tenant-é", "x" * 255])
def test_names_libvirt_takes(name):
    assert check_domain_name(name) == name


@pytest.mark.parametrize("name, words", [
    ("", "required"), (None, "required"), (7, "required"), ("a/b", "'/'"), ("a\nb", "control character"),
    ("a\tb", "control character"), ("42", "all digits"), ("x" * 256, "255 bytes"), (".", "names a directory"),
    ("..", "names a directory"),
])
def test_names_libvirt_refuses_name_the_rule(name, words):
    with pytest.raises(InputError) as error:
        check_domain_name(name, "tenants[0].name")
    assert "tenants[0].name" in str(error.value) and words in str(error.value)


@pytest.mark.parametrize("name", ["a/b", "bad\nname", "007"])
def test_the_planner_refuses_a_bad_name_before_placing(name):
    topology = {"numa_nodes": [{"id": 0, "cpus": [0, 1], "memory_mb": 1024, "hugepages": {}}],
                "cpus": [{"id": 0, "core_id": 0, "package_id": 0, "numa_node": 0, "siblings": [0], "online": True},
                         {"id": 1, "core_id": 1, "package_id": 0, "numa_node": 0, "siblings": [1], "online": True}],
                "pci_devices": {}, "gpus": [], "nics": [], "gpu_nic_affinity": {}, "iommu": {"enabled": True, "groups": {}}}
    with pytest.raises(InputError, match=r"tenants\[0\]\.name"):
        plan_tenants(topology, [{"name": name, "vcpus": 1, "memory_mb": 64}], {})


@pytest.mark.parametrize("index, target", [(0, "vda"), (25, "vdz"), (26, "vdaa"), (27, "vdab"), (51, "vdaz"), (52, "vdba"),
                                           (701, "vdzz"), (702, "vdaaa")])
def test_virtio_disk_targets_have_no_limit(index, target):
    assert virtio_disk_target(index) == target
