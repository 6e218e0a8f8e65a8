# -*- coding: utf-8 -*-
"""BLS boot entries and grubenv as RHEL-family hosts have them, for the grubby tests."""

from __future__ import annotations

# A Rocky Linux 8.9 BLS entry as the kernel package writes it (options through grubenv's kernelopts) and
# that installer's grubenv; an EL9 entry carries its options itself (CentOS Stream 9's default args).
EL8_ENTRY = ("title Rocky Linux (4.18.0-513.el8.x86_64) 8.9 (Green Obsidian)\nversion 4.18.0-513.el8.x86_64\n"
             "linux /vmlinuz-4.18.0-513.el8.x86_64\ninitrd /initramfs-4.18.0-513.el8.x86_64.img $tuned_initrd\n"
             "options $kernelopts $tuned_params\nid rocky-20231113-4.18.0-513.el8.x86_64\ngrub_users $grub_users\n"
             "grub_arg --unrestricted\ngrub_class rocky\n")
EL8_GRUBENV = ("# GRUB Environment Block\nsaved_entry=abc-4.18.0-513.el8.x86_64\nkernelopts=root=/dev/mapper/rl-root ro "
               "crashkernel=auto resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root rd.lvm.lv=rl/swap rhgb quiet \nboot_success=0\n")
EL9_OPTIONS = ("root=/dev/mapper/cs-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/cs-swap "
               "rd.lvm.lv=cs/root rd.lvm.lv=cs/swap rhgb quiet")
EL9_ENTRY = EL8_ENTRY.replace("options $kernelopts", "options " + EL9_OPTIONS)
