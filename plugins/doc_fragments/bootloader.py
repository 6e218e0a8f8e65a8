# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    """The GRUB defaults file and the boot menu's regeneration, shared by the modules that
    edit the kernel command line (iommu_grub, hugepages)."""

    DOCUMENTATION = r"""
options:
  grub_file:
    description:
      - The GRUB defaults file (a /bin/sh script), a path on the host (under O(root)). With
        O(bootloader_update=none) it may be a copy, to review a change before it is made, without root.
    type: path
    default: /etc/default/grub
  variable:
    description:
      - The variable to edit. C(GRUB_CMDLINE_LINUX) goes to every boot entry, recovery included;
        C(GRUB_CMDLINE_LINUX_DEFAULT) only to the normal ones.
    type: str
    choices: [GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT]
    default: GRUB_CMDLINE_LINUX
  bootloader_update:
    description:
      - V(auto) regenerates the boot menu after a change; C(update-grub) on Debian and Ubuntu,
        C(grubby --update-kernel=ALL) on RHEL-family hosts with BLS entries, else
        C(grub2-mkconfig -o) the C(grub.cfg) found. The family comes from C(/etc/os-release)
        or the tools present. It also regenerates when the file already holds the args but
        C(/boot/grub/grub.cfg) does not (an earlier regeneration failed), and with BLS while a boot entry
        (C(/boot/loader/entries/*.conf), on EL8 through C(kernelopts) in C(/boot/grub2/grubenv)) lacks a wanted
        arg or still has an unwanted one.
      - A host that booted with systemd-boot (it names itself in the EFI variable C(LoaderInfo), as
        systemd's Boot Loader Interface says; Proxmox VE with ZFS on UEFI boots so) does not read the GRUB file.
        With V(auto), an edit whose args its running kernel still lacks is refused there, naming the loader and the
        args, and nothing is changed. Kernel args for systemd-boot (C(/etc/kernel/cmdline), C(proxmox-boot-tool refresh))
        are not built.
      - V(none) only edits the file.
    type: str
    choices: [auto, none]
    default: auto
"""
