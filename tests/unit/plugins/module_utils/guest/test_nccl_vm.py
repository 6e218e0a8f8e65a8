# -*- coding: utf-8 -*-
"""NCCL inside a tenant VM (guest/nccl_vm): NCCL_IB_PCI_RELAXED_ORDERING's values, and the read-only
GPUDirect RDMA check on the files NCCL itself tests (src/transport/net_ib/gdr.cc)."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_vm import (
    PEERMEM_FILES, check_relaxed_ordering, gpudirect_state)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

from fakes.host_tree import FakeHost  # pylint: disable=import-error


@pytest.mark.parametrize("value", [0, 1, 2, "1", " 2 "])
def test_relaxed_ordering_values(value):
    assert check_relaxed_ordering(value) == str(value).strip()


@pytest.mark.parametrize("value", ["on", "3", "-1", "", "true"])
def test_relaxed_ordering_refused(value):
    with pytest.raises(InputError) as error:
        check_relaxed_ordering(value)
    assert "use 1 (on: a tenant VM" in str(error.value)


def guest(tmp_path, kernel=None, driver=True, peermem=None):
    tree = FakeHost(tmp_path)
    if kernel:
        tree.write("/proc/sys/kernel/osrelease", kernel + "\n")
    if driver:
        tree.write("/sys/module/nvidia/version", "535.183.01\n")
    if peermem:
        tree.write(peermem, "1.0\n")
    return Sysfs(str(tmp_path))


@pytest.mark.parametrize("peermem", PEERMEM_FILES)
def test_any_peer_memory_module_nccl_tests_is_gpudirect(tmp_path, peermem):
    state = gpudirect_state(guest(tmp_path, "5.4.0-190-generic", peermem=peermem))
    assert state["status"] == "peermem" and state["peermem"] == peermem and state["message"] is None


@pytest.mark.parametrize("kernel, status", [("5.11.0-49-generic", "missing"), ("5.12.0", "dma_buf"), ("6.8.0-45-generic", "dma_buf"),
                                            ("4.18.0-553.el8_10.x86_64", "missing"), ("unknown", "missing")])
def test_without_peermem_the_kernel_decides_what_is_said(tmp_path, kernel, status):
    state = gpudirect_state(guest(tmp_path, kernel))
    assert state["status"] == status and "modprobe nvidia-peermem" in state["message"]


def test_no_driver_is_said_not_failed(tmp_path):
    state = gpudirect_state(guest(tmp_path, "6.8.0-45-generic", driver=False))
    assert state["status"] == "no_driver" and state["driver"] is False and "no NVIDIA driver" in state["message"]
