# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL needs inside a tenant VM beyond bare metal: relaxed ordering on the IB verbs
transport, and GPUDirect RDMA (the NIC reading and writing GPU memory), checked read-only.

``NCCL_IB_PCI_RELAXED_ORDERING`` (NCCL src/transport/net_ib/init.cc, ``NCCL_PARAM(IbPciRelaxedOrdering,
"IB_PCI_RELAXED_ORDERING", 2)``): 0 off, 1 on, 2 (NCCL's default) on where the verbs library has
``ibv_reg_mr_iova2``. Relaxed ordering matters with ACS and ATS, i.e. in VMs, little on bare metal
(NVIDIA/nccl#1205); a tenant's guest writes 1.

GPUDirect RDMA, as NCCL decides it (src/transport/net_ib/gdr.cc): ``ncclIbGdrSupport`` is a
peer-memory module loaded, one of the files of :data:`PEERMEM_FILES` present
(``nvidia-peermem``, or the older ``nv_peer_mem``); otherwise ``ncclIbDmaBufSupport`` tries
DMA-BUF, which needs the kernel's RDMA DMA-BUF import (``ib_umem_dmabuf``, Linux 5.12) and a GPU
driver that exports DMA-BUF (CUDA's ``CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED``), which NCCL asks
at init. Without either, NCCL stages through host memory (no ``GDRDMA`` in its log)."""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

RELAXED_ORDERING = ("0", "1", "2")
PEERMEM_FILES = ("/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                 "/sys/module/nvidia_peermem/version")
# the NVIDIA kernel driver loaded: its module directory
NVIDIA_MODULE = "/sys/module/nvidia"
# the first kernel whose RDMA core imports DMA-BUF memory (ib_umem_dmabuf)
DMA_BUF_KERNEL = (5, 12)


# what the check says, per status (none with a peer-memory module loaded)
LOAD = "load nvidia-peermem (modprobe nvidia-peermem, and add it to /etc/modules-load.d)"
MESSAGES = {
    "no_driver": ("GPUDirect RDMA not checked: no NVIDIA driver is loaded in this guest (%(module)s absent); install the "
                  "GPU driver, then " + LOAD),
    "dma_buf": ("nvidia-peermem is not loaded (none of %(files)s): NCCL uses GPUDirect RDMA only through DMA-BUF, which this "
                "kernel (%(kernel)s) has but which needs the NVIDIA open kernel modules; " + LOAD + " to be sure"),
    "missing": ("no GPUDirect RDMA: nvidia-peermem is not loaded and this kernel (%(kernel)s) predates RDMA DMA-BUF (Linux "
                "5.12), so NCCL stages every transfer through host memory; " + LOAD),
}


def check_relaxed_ordering(value, option="ib_pci_relaxed_ordering"):
    """NCCL_IB_PCI_RELAXED_ORDERING as NCCL reads it: 0, 1 or 2."""
    text = str(value).strip()
    if text not in RELAXED_ORDERING:
        raise InputError("%s: %r is not a value NCCL_IB_PCI_RELAXED_ORDERING takes; use 1 (on: a tenant VM, with ACS and "
                         "ATS), 2 (on where the verbs library can, NCCL's default) or 0 (off)" % (option, value))
    return text


def _kernel(release):
    match = re.match(r"^(\d+)\.(\d+)", release or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def gpudirect_state(fs):
    """-> {"driver", "peermem", "kernel", "dma_buf_kernel", "status", "message"} read through
    ``fs`` (a Sysfs reader): ``status`` ``peermem`` (NCCL uses GPUDirect RDMA), ``dma_buf``
    (no peer-memory module, a kernel with RDMA DMA-BUF: NCCL's own test at init decides),
    ``missing`` (neither) or ``no_driver`` (no NVIDIA driver loaded: nothing to check); the
    message says what is missing and the fix, None with peermem."""
    driver = fs.isdir(NVIDIA_MODULE)
    peermem = next((path for path in PEERMEM_FILES if fs.exists(path)), None)
    release = (fs.read("/proc/sys/kernel/osrelease") or "").strip() or None
    kernel = _kernel(release)
    dma_buf = kernel is not None and kernel >= DMA_BUF_KERNEL
    state = {"driver": driver, "peermem": peermem, "kernel": release, "dma_buf_kernel": dma_buf}
    if not driver:
        status = "no_driver"
    elif peermem:
        status = "peermem"
    else:
        status = "dma_buf" if dma_buf else "missing"
    message = MESSAGES.get(status)
    if message:
        message %= {"module": NVIDIA_MODULE, "files": ", ".join(PEERMEM_FILES), "kernel": release or "unknown"}
    state.update(status=status, message=message)
    return state
