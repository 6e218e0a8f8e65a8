# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the programs of a captured host answered, as the capture holds it.

A module under a captured tree (``root`` other than ``/``, the preview) runs no program: the
answers it would ask the host for come from files that playbooks/files/capture_host.py wrote while it
ran on the host, under :data:`CAPTURE_DIR` in the capture (one file per program, its stdout as
printed). On the running host (``root`` ``/``) nothing is read from there: the callers ask the
programs themselves. Pure apart from the reads through the ``Sysfs`` reader it is given.

- the hypervisor's versions (``libvirtd --version``, ``qemu-system-x86_64 --version``), so
  that a domain feature that needs a newer libvirt (``<maxphysaddr>``: libvirt 8.7.0) can be
  gated on the host's own versions, not the controller's;
- the NVIDIA services' state (``systemctl show -p Id,LoadState,UnitFileState,ActiveState``),
  so that the boot stage's preview says which of them it would stop and disable.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

CAPTURE_DIR = "/.capture"
# file name under CAPTURE_DIR -> the argv that playbooks/files/capture_host.py ran for it (kept equal to
# the tool's PROGRAMS: tests/unit/tools/test_capture_host.py checks it)
LIBVIRTD_VERSION = "libvirtd-version.txt"
QEMU_VERSION = "qemu-version.txt"
NVIDIA_UNITS = "systemctl-show-nvidia.txt"
PROGRAMS = {
    LIBVIRTD_VERSION: ["libvirtd", "--version"],
    QEMU_VERSION: ["qemu-system-x86_64", "--version"],
    NVIDIA_UNITS: ["systemctl", "show", "-p", "Id,LoadState,UnitFileState,ActiveState",
                   "nvidia-persistenced.service", "nvidia-fabricmanager.service", "nvidia-dcgm.service", "dcgm.service"],
}
# <maxphysaddr> in <cpu>: libvirt 8.7.0 (libvirt commit 1c1a7cdd, "qemu: Add support for max
# physical address size"; QEMU's host-phys-bits / phys-bits since 2.7.0). Ubuntu 22.04 ships 8.0.0.
MAXPHYSADDR_LIBVIRT = (8, 7, 0)
MAXPHYSADDR_QEMU = (2, 7, 0)


def path_of(name):
    return "%s/%s" % (CAPTURE_DIR, name)


def read_output(fs, name):
    """The captured stdout of program ``name`` (a file name of :data:`PROGRAMS`), or None on
    the running host and where the capture has none (the program was missing on the host)."""
    if fs.root in ("/", ""):
        return None
    return fs.read(path_of(name))


def parse_libvirtd_version(text):
    """``libvirtd (libvirt) 8.0.0`` -> ``8.0.0``; None for any other text."""
    match = re.search(r"^\S+ \(libvirt\) (\d+\.\d+\.\d+)\s*$", text or "", re.M)
    return match.group(1) if match else None


def parse_qemu_version(text):
    """``QEMU emulator version 6.2.0 (Debian 1:6.2+dfsg-2ubuntu6.12)`` -> ``6.2.0``; None for
    any other text."""
    match = re.search(r"^QEMU emulator version (\d+\.\d+(?:\.\d+)?)", text or "", re.M)
    return match.group(1) if match else None


def version_tuple(text):
    """``8.0.0`` -> (8, 0, 0); None for None."""
    if not text:
        return None
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def hypervisor_versions(fs):
    """``{libvirt, qemu, captured}`` of the host under ``fs``: the versions the capture holds
    (None where it holds none), ``captured`` whether the capture had any answer."""
    libvirt_text, qemu_text = read_output(fs, LIBVIRTD_VERSION), read_output(fs, QEMU_VERSION)
    return {"libvirt": parse_libvirtd_version(libvirt_text), "qemu": parse_qemu_version(qemu_text),
            "captured": libvirt_text is not None or qemu_text is not None}


def maxphysaddr_supported(versions):
    """Whether the host's libvirt and QEMU take ``<maxphysaddr>``: True / False, or None when
    the versions are unknown (not captured, or the running host's, which its callers ask)."""
    libvirt, qemu = version_tuple((versions or {}).get("libvirt")), version_tuple((versions or {}).get("qemu"))
    if libvirt is None:
        return None
    return libvirt >= MAXPHYSADDR_LIBVIRT and (qemu is None or qemu >= MAXPHYSADDR_QEMU)


def hypervisor_note(versions):
    """One line for the preview's notes, or None when the capture holds no version."""
    if not (versions or {}).get("captured"):
        return None
    supported = maxphysaddr_supported(versions)
    return "hypervisor on the capture: libvirt %s, QEMU %s; <maxphysaddr> (libvirt %s and later) %s" % (
        versions.get("libvirt") or "unknown", versions.get("qemu") or "unknown",
        ".".join(str(p) for p in MAXPHYSADDR_LIBVIRT),
        "available" if supported else "not available" if supported is False else "unknown")
