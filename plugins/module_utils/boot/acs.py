# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ACS per path, for fast tenants: the PCIe Access Control Services settings on the bridges of
each GPU-to-NIC path, set at boot by the kernel's ``pci=config_acs=`` parameter. Pure: the host
model and the inputs in, the decision out.

NVIDIA's guide for KVM inference VMs (NVIDIA AI Enterprise, "Optimizing VM Configuration for AI
Inference", appendix "ATS and ACS configuration") has ATS on the NIC and the ACS of the PCIe
switches and root ports "configured to allow ATS to work", applied "only to the bridges on the
paths to the passed-through GPUs and ConnectX functions", never "one ACS value to every
ACS-capable device". With ATS the NIC's translated requests may go straight to the peer GPU:
ACS Direct Translated P2P on, ACS Translation Blocking off (PCIe r7.0 6.12.1.1 and 6.12.3, as
the kernel's p2pdma code cites them); every other control left as the kernel set it, so that
untranslated requests still go up to the IOMMU.

The kernel parameter (Documentation/admin-guide/kernel-parameters.txt, ``pci=config_acs=``;
drivers/pci/pci.c ``__pci_config_acs``): ``<ACS flags>@<pci_dev>[; ...]``, the flags one of
``0`` (force disabled), ``1`` (force enabled), ``x`` (unchanged) per bit, bit 6 written first
(the kernel reads them from the right: ``10x`` enables P2P Request Redirect, disables Translation
Blocking and leaves Source Validation). It came with Linux 6.11 (commit 47c8846a49ba, "PCI:
Extend ACS configurability"); a list of more than one device failed to parse ("PCI: Can't parse
ACS command line parameter") until "PCI/ACS: Fix 'pci=config_acs=' parameter" (Linux 6.15, also
in 6.14.y stable). The kernel keeps the last ``pci=config_acs=`` it reads, so every bridge goes
in one argument, and a list needs ``;``, which GRUB's script language reads as the end of a
command (grub-core/script/yylex.l: ``";"`` is a token, a single-quoted string a part of a word
whose quotes the lexer drops). The boot stage writes a list in single quotes into the GRUB
defaults file (``'pci=config_acs=F@A;F@B'``): grub-mkconfig's 10_linux copies the variable into
each ``linux`` line as it is, GRUB's lexer takes the quotes off, grub-core/lib/cmdline.c passes an
arg without a blank as it is, and the kernel splits its command line on blanks only, with double
quotes (lib/cmdline.c ``next_arg``), so it reads ``pci=config_acs=F@A;F@B`` whole. Where the boot
menu is built another way (RHEL-family: grubby and the BLS entries), a list is said, not written
(see :func:`acs_plan`).

IOMMU groups: the kernel calls a device isolated when the bridges above it have Source
Validation, P2P Request Redirect, P2P Completion Redirect and Upstream Forwarding
(drivers/iommu/iommu.c ``REQ_ACS_FLAGS``). Flags that clear one of them on a path bridge merge
the groups below it, and below a path bridge sits a PF whose VFs go to several tenants: refused.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_address import nearest_shared_bridge

__metaclass__ = type

BITS = ("Source Validation", "Translation Blocking", "P2P Request Redirect", "P2P Completion Redirect",
        "Upstream Forwarding", "P2P Egress Control", "Direct Translated P2P")
# bits 0, 2, 3, 4: drivers/iommu/iommu.c REQ_ACS_FLAGS (PCI_ACS_SV | PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_UF)
ISOLATION_BITS = (0, 2, 3, 4)
# bit 6 Direct Translated P2P on, bit 1 Translation Blocking off, the rest unchanged
DEFAULT_FLAGS = "1xxxx0x"
FLAGS_RE = re.compile(r"^[01x]{1,7}\Z")
FIRST_KERNEL = (6, 11)
LIST_KERNEL = (6, 15)
PARAM = "pci"
PREFIX = "config_acs="


def check_flags(flags, option="acs.flags"):
    """The flags as the kernel reads them (up to 7 of 0/1/x, bit 6 first); InputError otherwise."""
    text = str(flags if flags is not None else "").strip().lower()
    if not FLAGS_RE.match(text):
        raise InputError("%s: %r is not a config_acs flag string: up to 7 characters of 0 (force disabled), 1 (force "
                         "enabled) or x (unchanged), bit 6 (Direct Translated P2P) first and bit 0 (Source Validation) "
                         "last, as in the default %s" % (option, flags, DEFAULT_FLAGS))
    return text


def bit_values(flags):
    """``{bit: '0'|'1'|'x'}`` for bits 0..6 (missing leading bits are unchanged)."""
    padded = flags.rjust(7, "x")
    return dict((bit, padded[6 - bit]) for bit in range(7))


def kernel_version(release):
    """(major, minor) of a kernel release (``6.8.0-49-generic``), or None."""
    match = re.match(r"^(\d+)\.(\d+)", str(release or "").strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def path_bridges(pci, first, second):
    """The bridges between two devices where peer-to-peer turns around: below their nearest shared
    bridge (the downstream ports of one switch), or, under one host bridge without a shared
    bridge, both chains up to their root ports. None when no peer path exists (different host
    bridges: the traffic crosses the CPU)."""
    dev_a, dev_b = pci.get(first) or {}, pci.get(second) or {}
    chain_a, chain_b = list(dev_a.get("upstream") or []), list(dev_b.get("upstream") or [])
    common = nearest_shared_bridge(chain_a, chain_b)
    if common is not None:
        return chain_a[:chain_a.index(common)] + chain_b[:chain_b.index(common)]
    if dev_a.get("root_bus") is not None and dev_a.get("root_bus") == dev_b.get("root_bus"):
        return chain_a + chain_b
    return None


def _below(pci, bridge):
    return sorted(addr for addr, dev in pci.items() if bridge in (dev.get("upstream") or []) and not dev.get("is_bridge"))


def acs_plan(model, gpus, pfs, flags=DEFAULT_FLAGS, release=None, list_refused=None):
    """The ACS decision for the tenants' GPUs (``gpus``) and the PFs whose VFs go to them (``pfs``):
    each GPU's path to its nearest PF(s) (the pairs the planner makes), their bridges only.

    Returns ``{flags, paths: [{gpu, pf, bridges}], bridges, arg, written, kernel, notes}``: ``arg``
    the kernel argument the bridges need (``pci=config_acs=FLAGS@BRIDGE[;...]``), ``written``
    whether the boot stage writes it (a kernel that has the parameter: from 6.11 for one bridge,
    from 6.15 for a list; a list only where ``list_refused``, the reason this host's boot menu may
    not get a ``;``, is None), ``notes`` what the operator must know or do. InputError for bad
    flags, unknown devices, and flags that would merge IOMMU groups across tenants."""
    flags = check_flags(flags)
    pci = model.get("pci_devices") or {}
    for option, addresses in (("acs.gpus", gpus), ("acs.pfs", pfs)):
        unknown = [a for a in addresses if a not in pci]
        if unknown:
            raise InputError("%s: %s not in the host model (PCI addresses as lspci -D prints them)" % (option, ", ".join(unknown)))
    paths, bridges = [], []
    for gpu in sorted(gpus):
        # the pairs the planner makes: a GPU with a VF of its nearest PF(s) (placement ranks PIX before PXB, PHB)
        found = []
        for pf in sorted(pfs):
            on_path = path_bridges(pci, gpu, pf)
            if on_path is not None:
                found.append((len(on_path), pf, [b for b in on_path if (pci.get(b) or {}).get("is_bridge")]))
        nearest = min([length for length, _pf, _bridges in found] or [0])
        for length, pf, on_path in found:
            if length == nearest:
                paths.append({"gpu": gpu, "pf": pf, "bridges": on_path})
                bridges.extend(b for b in on_path if b not in bridges)
    bridges.sort()
    values = bit_values(flags)
    cleared = [BITS[bit] for bit in ISOLATION_BITS if values[bit] == "0"]
    if cleared and bridges:
        for bridge in bridges:
            switch = ((pci.get(bridge) or {}).get("upstream") or [bridge])[0]
            tenants = [a for a in _below(pci, switch) if a in gpus or a in pfs]
            if len(tenants) > 1 or any(a in pfs for a in tenants):
                raise InputError("acs.flags: %s turns off %s on %s, above %s: the kernel then puts them in one IOMMU group "
                                 "(drivers/iommu/iommu.c REQ_ACS_FLAGS), and a PF's VFs go to several tenants; leave bits "
                                 "0, 2, 3 and 4 at x or 1 (the default %s changes only Direct Translated P2P and "
                                 "Translation Blocking, which the groups do not depend on)"
                                 % (flags, ", ".join(cleared), bridge, ", ".join(tenants), DEFAULT_FLAGS))
    result = {"flags": flags, "paths": paths, "bridges": bridges, "arg": None, "written": False, "kernel": release,
              "notes": []}
    if not bridges:
        result["notes"].append("ACS: no tenant GPU shares a PCIe switch or host bridge with a PF of the tenants' VFs; "
                               "no bridge to set")
        return result
    entries = ";".join("%s@%s" % (flags, bridge) for bridge in bridges)
    result["arg"] = "%s=%s%s" % (PARAM, PREFIX, entries)
    version = kernel_version(release)
    if version is None or version < FIRST_KERNEL:
        result["notes"].append(
            "ACS: the running kernel %s has no pci=config_acs= (it came with Linux %d.%d, commit 47c8846a49ba): boot a "
            "Linux %d.%d or later kernel for the boot stage to set it; until then set it after each boot on %s with "
            "setpci (ECAP_ACS+0x6.w: bit 6 Direct Translated P2P on, bit 1 Translation Blocking off, the others as "
            "they are), before the tenants start"
            % (release or "(unknown)", FIRST_KERNEL[0], FIRST_KERNEL[1], FIRST_KERNEL[0], FIRST_KERNEL[1], ", ".join(bridges)))
        return result
    if len(bridges) > 1 and version < LIST_KERNEL:
        result["notes"].append(
            "ACS: %d bridges are on the tenants' GPU-to-NIC paths; the kernel takes them as one list, %s, which needs "
            "Linux %d.%d (or a stable kernel with 'PCI/ACS: Fix pci=config_acs= parameter'); the running kernel is %s, "
            "so the boot stage does not write it: boot a Linux %d.%d or later kernel, or, on a stable kernel with that "
            "fix, add it to GRUB_CMDLINE_LINUX in single quotes ('%s') by hand; or set the bridges with setpci after "
            "each boot" % (len(bridges), result["arg"], LIST_KERNEL[0], LIST_KERNEL[1], release, LIST_KERNEL[0],
                           LIST_KERNEL[1], result["arg"]))
        return result
    if len(bridges) > 1 and list_refused:
        result["notes"].append(
            "ACS: %d bridges are on the tenants' GPU-to-NIC paths; the kernel takes them as one list, %s, whose ';' "
            "GRUB's script language reads as the end of a command, and %s: add it to the kernel command line by hand "
            "where it reaches the kernel whole (check /proc/cmdline after the reboot), or set the bridges with setpci "
            "after each boot" % (len(bridges), result["arg"], list_refused))
        return result
    result["written"] = True
    return result
