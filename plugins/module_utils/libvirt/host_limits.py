# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the host bounds a tenant's definition by: the host model its pins are checked against
(a captured tree's, or libvirt's capabilities), whether its libvirt takes ``<maxphysaddr>``, and
the 64-bit MMIO window OVMF needs for its devices' BARs."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.captured_programs import MAXPHYSADDR_LIBVIRT, maxphysaddr_supported
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.libvirt.domain_readers import host_cpus, host_cpus_from_topology
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_bars import (
    ABOVE_HT_HOLE_MB, read_mmio64_sizes, window_above_ht_hole_mb, window_setting_mb)

__metaclass__ = type


def host_model(conn, host):
    """The host's NUMA cells, CPUs and hugepage sizes that pins are checked against: the host
    model read under ``root`` when that is a captured host tree (a preview, where ``uri`` is
    libvirt's test driver, not that host), else libvirt's capabilities."""
    if not host.live and host.fs.isdir("/sys/devices/system/node"):
        model = host_cpus_from_topology(host.topology())
        if model["cpus"]:
            return model
    return host_cpus(conn.capabilities(), conn.cpu_map_length())


def maxphysaddr_gate(conn, host, topology=None):
    """-> (whether the host's libvirt takes ``<maxphysaddr>``: True, False or None when unknown,
    the versions it was decided on): a captured tree's from the capture (the host model's
    ``hypervisor``; the ``uri`` of a preview is libvirt's test driver, not that host's), the
    running host's from the connection."""
    if host.live:
        versions = conn.hypervisor_versions()
    else:
        versions = (topology if topology is not None else host.topology()).get("hypervisor") or {}
    return maxphysaddr_supported(versions), versions


def maxphysaddr_note(specs, supported, versions):
    """The one line a call says when the gate decided a definition's ``<maxphysaddr>`` (left out
    on an older libvirt, written with the version unknown), naming the domains; else None."""
    wanted = "libvirt %s" % ".".join(str(part) for part in MAXPHYSADDR_LIBVIRT)
    left_out = sorted(spec.name for spec in specs if getattr(spec, "phys_bits", None) == "left out")
    if left_out:
        return ("libvirt %s on this host predates <maxphysaddr> (%s): left out of the definition of %s; a GPU with large "
                "BARs may then need a host CPU with enough physical address bits for guest RAM and its 64-bit MMIO "
                "window (or a newer libvirt)" % (versions.get("libvirt"), wanted, ", ".join(left_out)))
    written = sorted(spec.name for spec in specs if getattr(spec, "phys_bits", None) == "written")
    if written and supported is None:
        return ("the libvirt version of this host is unknown (the capture holds no .capture/libvirtd-version.txt): "
                "<maxphysaddr mode='passthrough'/> is written into the definition of %s, which needs %s or later"
                % (", ".join(written), wanted))
    return None


def mmio_window(spec, fs):
    """-> (the 64-bit window OVMF needs for the tenant's devices in MiB or None, warnings):
    from each device's sysfs ``resource`` (pci_bars)."""
    if spec.firmware != "efi":
        return None, []
    sizes, unknown = [], []
    for address in spec.gpus + spec.vfs:
        found = read_mmio64_sizes(fs, address)
        if found is None:
            unknown.append(address)
        else:
            sizes.extend(found)
    warnings = []
    if unknown:
        warnings.append("no whole sysfs resource file for %s (missing, empty, truncated or not the kernel's format): "
                        "the 64-bit MMIO window of %s leaves their BARs out (give mmio_window_mb to size it, or "
                        "capture the host again)" % (", ".join(unknown), spec.name))
    return window_setting_mb(sizes), warnings


def place_above_ht_hole(spec, given_mb, cpu_vendor):
    """On an AMD host, the 64-bit window of a UEFI tenant with GPUs or VFs sized so that OVMF puts
    it above the HyperTransport hole (pci_bars.ovmf_window: at least 1 TiB, which needs guest
    address bits above 40, i.e. ``<maxphysaddr mode='passthrough'/>``); ``given_mb``: the caller's
    ``mmio_window_mb`` (None when not given; 0, no entry, is kept; a smaller one is refused,
    nothing changed). -> a warning, or None; ``spec.mmio_window_mb`` set."""
    if cpu_vendor != "amd" or spec.firmware != "efi" or not (spec.gpus or spec.vfs) or given_mb == 0:
        return None
    if spec.maxphysaddr is False:
        return ("%s: this AMD host's libvirt predates <maxphysaddr>, so the guest keeps QEMU's 40 address bits and OVMF "
                "may put its 64-bit window in the HyperTransport hole (0xfd00000000-0xffffffffff), where peer-to-peer DMA "
                "between its GPUs and VFs fails; with libvirt 8.7.0 or later the window is placed above it" % spec.name)
    if given_mb is not None and given_mb < ABOVE_HT_HOLE_MB:
        raise InputError("mmio_window_mb: %d MiB for %s on an AMD host: OVMF could place a window that small in the "
                         "HyperTransport hole (0xfd00000000-0xffffffffff), where peer-to-peer DMA fails; give at least %d "
                         "(1 TiB, placed above it) or leave mmio_window_mb out"
                         % (spec.mmio_window_mb, spec.name, ABOVE_HT_HOLE_MB))
    spec.mmio_window_mb = window_above_ht_hole_mb(spec.mmio_window_mb)
    return None
