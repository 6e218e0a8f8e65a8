# -*- coding: utf-8 -*-
"""tenancy/fields: each of a tenant's fields checked by one function, pure."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import (
    check_firmware, check_machine, check_size, check_tenant_mac, over_host)


@pytest.mark.parametrize("args, words", [
    ((None, 64), "vcpus: required"),
    ((1, None), "memory_mb: required"),
    ((0, 64), "vcpus: must be at least 1, got 0"),
    (("two", 64), "vcpus: 'two' is not a whole number"),
    ((True, 64), "vcpus: True is not a whole number"),
    ((1.5, 64), "vcpus: 1.5 is not a whole number"),
    ((4, 64, 2), "max_vcpus: 2 is below vcpus 4"),
    ((5, 64), "vcpus: 5 is more than the 4 CPUs of this host"),
    ((2, 64, 8), "max_vcpus: 8 is more than the 4 CPUs of this host"),
    ((1, 6145), "memory_mb: 6145 MiB is more than the 6144 MiB of memory this host has"),
])
def test_sizes_are_whole_ordered_and_bound_by_the_host(args, words):
    with pytest.raises(InputError) as err:
        check_size(*args, limits={"cpus": 4, "memory_mb": 6144}, where="tenants[0] (a): ")
    assert str(err.value).startswith("tenants[0] (a): ") and words in str(err.value)


def test_names_and_firmware():
    assert check_size(2, "64", limits={"cpus": 4, "memory_mb": None}) == (2, 2, 64)
    assert check_firmware(None) == "efi" and check_firmware("bios") == "bios"
    assert check_machine("pc-q35-8.2") == "pc-q35-8.2" and check_machine(None) is None
    for bad in ("pc\x01", "q35 ", "-pc", "a" * 65, 35):
        with pytest.raises(InputError, match="machine: "):
            check_machine(bad)
    assert check_tenant_mac(["52:54:00:00:00:0A", None]) == ["52:54:00:00:00:0a", None]


def _over_host_by_rule(vcpus, max_vcpus, memory_mb, limits):
    """over_host's reading, option by option: the first of vcpus and max_vcpus above the host's CPUs,
    then the memory above the host's."""
    limits = limits or {}
    for key, value in (("vcpus", vcpus), ("max_vcpus", max_vcpus)):
        if limits.get("cpus") and value > limits["cpus"]:
            return key, value
    if limits.get("memory_mb") and memory_mb > limits["memory_mb"]:
        return "memory_mb", memory_mb
    return None


def test_over_host_names_what_the_rule_names():
    # every order of the sizes around the host's CPUs and memory, and limits partly or not known
    limits = [None, {}, {"cpus": None, "memory_mb": None}, {"cpus": 4}, {"memory_mb": 1024}, {"cpus": 4, "memory_mb": 1024},
              {"cpus": 0, "memory_mb": 0}]
    for limit in limits:
        for vcpus in (1, 4, 5):
            for max_vcpus in (1, 4, 5, 8):
                for memory_mb in (512, 1024, 2048):
                    beyond = over_host(vcpus, max_vcpus, memory_mb, limit)
                    named = _over_host_by_rule(vcpus, max_vcpus, memory_mb, limit)
                    if named is None:
                        assert beyond is None
                    else:
                        assert beyond.startswith("%s: %d " % named), (beyond, named)
