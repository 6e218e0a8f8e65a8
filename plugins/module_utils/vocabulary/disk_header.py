# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the first bytes of a file qemu-img takes as ``raw`` hold: a disk (a partition table or a
filesystem a guest can boot from or mount) or something else (a text file such as /etc/shadow,
an archive, a program), said in words that never quote the file's contents.

qemu-img reads any file it knows no format of as raw, so its answer alone does not tell a raw
cloud image from a file that is none. The signatures and their offsets are each format's own:
the MBR boot signature 0x55 0xAA at byte 510 (UEFI specification 2.10, 5.2.1 "Legacy Master Boot
Record"); the GPT header's ``EFI PART`` at LBA 1 (512 or 4096 bytes; 5.3.2 "GPT Header"); ext2/3/4's
magic 0xEF53 at byte 56 of the superblock at 1024 (the kernel's fs/ext4/ext4.h, EXT4_SUPER_MAGIC);
XFS ``XFSB`` at 0 (xfs_format.h, XFS_SB_MAGIC); btrfs ``_BHRfS_M`` at 0x10040 (btrfs_tree.h,
BTRFS_MAGIC, superblock at 64 KiB); ISO 9660 ``CD001`` at 0x8001 (ECMA-119 8.1); squashfs ``hsqs``
at 0 (squashfs_fs.h); LUKS ``LUKS\\xba\\xbe`` at 0; LVM's ``LABELONE`` in sector 1; swap's
``SWAPSPACE2`` at 4086 (a 4 KiB page's end). ``tests/unit`` makes each with the real tool but LVM
(pvcreate writes only to a block device)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# enough for the farthest signature read here (btrfs: 0x10040 + 8)
HEAD_BYTES = 0x10048

DISK_SIGNATURES = (
    # (offset, bytes, what it is)
    (512, b"EFI PART", "a GPT partition table"),
    (4096, b"EFI PART", "a GPT partition table (4 KiB sectors)"),
    (1080, b"\x53\xef", "an ext2/3/4 filesystem"),
    (0, b"XFSB", "an XFS filesystem"),
    (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
    (0x8001, b"CD001", "an ISO 9660 filesystem"),
    (0, b"hsqs", "a squashfs filesystem"),
    (0, b"LUKS\xba\xbe", "a LUKS volume"),
    (512, b"LABELONE", "an LVM physical volume"),
    (4086, b"SWAPSPACE2", "a swap area"),
)
# files that are no disk but often given for one: said by name, with what to do
OTHER_SIGNATURES = (
    (0, b"\x1f\x8b", "gzip-compressed data (decompress it: gunzip)"),
    (0, b"\xfd7zXZ\x00", "xz-compressed data (decompress it: unxz)"),
    (0, b"BZh", "bzip2-compressed data (decompress it: bunzip2)"),
    (0, b"\x28\xb5\x2f\xfd", "zstd-compressed data (decompress it: unzstd)"),
    (0, b"PK\x03\x04", "a zip archive (extract the image from it)"),
    (257, b"ustar", "a tar archive (extract the image from it: tar -xf)"),
    (0, b"\x7fELF", "an ELF program or library"),
)
MBR_SIGNATURE = (510, b"\x55\xaa")


def _at(head, offset, magic):
    return head[offset:offset + len(magic)] == magic


def disk_contents(head):
    """What a raw file's first :data:`HEAD_BYTES` (or all of a shorter file) hold, as a disk:
    "a GPT partition table", "an ext2/3/4 filesystem", "an MBR partition table or boot sector",
    ...; None when they hold none of these."""
    for offset, magic, what in DISK_SIGNATURES:
        if _at(head, offset, magic):
            return what
    if _at(head, *MBR_SIGNATURE):
        return "an MBR partition table or boot sector"
    return None


def not_a_disk(head, size):
    """What a file that holds no disk is, in words that quote nothing of it; ``size`` its length
    in bytes."""
    if size == 0:
        return "an empty file"
    for offset, magic, what in OTHER_SIGNATURES:
        if _at(head, offset, magic):
            return what
    if not head.strip(b"\x00"):
        return "%d bytes that are all zeros where a partition table or filesystem would begin" % size
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and all(ch.isprintable() or ch in "\t\r\n" for ch in text):
        return "a text file of %d bytes" % size
    return "%d bytes with no partition table and no filesystem signature" % size
