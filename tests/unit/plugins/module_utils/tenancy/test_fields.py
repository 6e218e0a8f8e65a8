# -*- coding: utf-8 -*-
"""tenancy/fields: each of a tenant's fields checked by one function, pure."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.tenancy.fields import check_firmware, check_machine, check_size, check_tenant_mac


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
