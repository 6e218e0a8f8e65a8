# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU lists in the kernel's and libvirt's form (``0-3,8,10-11``): one strict parser,
bounded before anything is expanded, and one formatter."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# The kernel's NR_CPUS ceiling (MAXSMP on x86_64): no host has a CPU number at or above it.
MAX_CPUS = 8192


def parse_cpulist(value, what="cpulist", bound=MAX_CPUS):
    """``"0-3,8"``, ``[0, 1]``, ``3`` or ``"3"`` -> sorted list of ints. Every CPU must be
    below ``bound`` (the host's CPU count where known), checked before a range is expanded,
    so ``0-99999999`` is an error and not a memory hog. Raises :class:`InputError` naming
    ``what``."""
    if value is None:
        return []
    if isinstance(value, bool):
        raise InputError("%s: %r is not a CPU list; use e.g. \"0-3,8\" or [0, 1]" % (what, value))
    if isinstance(value, int):
        items = [value]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        items = [part.strip() for part in str(value).split(",") if part.strip()]
    cpus = set()
    for item in items:
        low, high = _bounds(item, value, what)
        if low < 0:
            raise InputError("%s: CPU numbers cannot be negative (%r)" % (what, value))
        if high >= bound:
            raise InputError("%s: CPU %d is beyond this host's CPUs (0-%d) in %r" % (what, high, bound - 1, value))
        cpus.update(range(low, high + 1))
    return sorted(cpus)


def _bounds(item, value, what):
    if isinstance(item, bool):
        raise InputError("%s: %r is not a CPU number" % (what, item))
    if isinstance(item, int):
        return item, item
    text = str(item).strip()
    try:
        if "-" in text[1:]:
            low, high = text.split("-", 1) if not text.startswith("-") else (None, None)
            low, high = int(low), int(high)
            if low > high:
                raise ValueError(text)
            return low, high
        return int(text), int(text)
    except (TypeError, ValueError):
        raise InputError("%s: %r is not a CPU list; use e.g. \"0-3,8\" or [0, 1]" % (what, value))


def read_cpulist(text, bound=MAX_CPUS):
    """A cpulist the kernel wrote (sysfs); [] when the file is empty or not a cpulist."""
    try:
        return parse_cpulist(text, bound=bound)
    except InputError:
        return []


def format_cpulist(cpus):
    """[0, 1, 2, 5] -> ``"0-2,5"``."""
    cpus = sorted(set(cpus))
    parts = []
    index = 0
    while index < len(cpus):
        start = end = cpus[index]
        while index + 1 < len(cpus) and cpus[index + 1] == end + 1:
            index += 1
            end = cpus[index]
        parts.append(str(start) if start == end else "%d-%d" % (start, end))
        index += 1
    return ",".join(parts)
