# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hugepage size names: the collection says ``2M`` and ``1G``; sysfs says
``hugepages-2048kB``; the kernel command line says ``hugepagesz=1G``."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

SIZES_KB = {"2M": 2048, "1G": 1048576}
SIZE_NAMES = tuple(SIZES_KB)
GLOBAL_DIR = "/sys/kernel/mm/hugepages"
# sysfs directory suffix per size: /sys/kernel/mm/hugepages/hugepages-2048kB
SYSFS_NAMES = dict((name, "%dkB" % kb) for name, kb in SIZES_KB.items())
_ALIASES = {}
for _name, _kb in SIZES_KB.items():
    for _alias in (_name, _name + "b", "%dk" % _kb, "%dkb" % _kb, "%d" % _kb):
        _ALIASES[_alias.lower()] = _name


def size_name(value, what="hugepage size", allow_none=False):
    """``2M`` / ``1G`` / ``2048kB`` / 2048 -> ``2M`` or ``1G``; with ``allow_none``,
    None / ``none`` -> None. Anything else is an :class:`InputError` naming ``what``."""
    text = "" if value is None else str(value).strip()
    if allow_none and text.lower() in ("", "none", "no", "false", "off"):
        return None
    name = _ALIASES.get(text.lower().replace(" ", ""))
    if name is None:
        choices = " or ".join(SIZE_NAMES) + (" or none" if allow_none else "")
        raise InputError("%s: %r is not a hugepage size; use %s" % (what, value, choices))
    return name


def name_of_kb(kb):
    """2048 -> ``2M``; None for a size the collection does not manage."""
    for name, size in SIZES_KB.items():
        if size == kb:
            return name
    return None


def host_sizes_kb(fs):
    """The page sizes (kB) the host's CPU and kernel have, from /sys/kernel/mm/hugepages
    (``hugepages-2048kB``, ...); None when the directory is missing (not known)."""
    if not fs.isdir(GLOBAL_DIR):
        return None
    sizes = set()
    for entry in fs.listdir(GLOBAL_DIR):
        if entry.startswith("hugepages-") and entry.endswith("kB") and entry[len("hugepages-"):-2].isdigit():
            sizes.add(int(entry[len("hugepages-"):-2]))
    return sizes
