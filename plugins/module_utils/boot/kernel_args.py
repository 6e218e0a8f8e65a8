# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel command-line arguments: validated edit operations over a list of args.

An edit is a list of operations (:class:`SetArg`, :class:`RemoveArg`, :class:`IommuOn`,
:class:`Passthrough`, :class:`MergeIds`, :class:`HugepageReservation`); :func:`apply_ops`
applies them to a list of args and returns a new list, leaving args no operation is about
where they were. The same operations applied to ``/proc/cmdline`` tell whether the running
kernel already has what is wanted (nothing would change) or needs a reboot.

Names compare the way the kernel compares them: ``-`` and ``_`` are the same
(``pci-stub.ids`` is ``pci_stub.ids``).
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.pci_ids import parse_vendor_device

__metaclass__ = type

# Characters a new argument may hold. Anything else (blanks, quotes, $, `, \, ;, globs,
# braces) means something to /bin/sh, to GRUB's script language, or to the kernel's own
# quoting, and is refused rather than escaped three different ways.
SAFE_ARG_RE = re.compile(r"^[A-Za-z0-9_.,:/+@%=~!^-]+\Z")
# hugepages=N or, per node (Linux 5.16+), hugepages=NODE:N,NODE:N
HUGEPAGES_COUNT_RE = re.compile(r"^(?:\d+|\d+:\d+(?:,\d+:\d+)*)\Z")
# Names set through the module's own options, never through ``args``.
MANAGED_NAMES = {
    "intel_iommu": "iommu and vendor",
    "amd_iommu": "iommu and vendor",
    "iommu": "passthrough",
    "pci_stub.ids": "pre_bind_ids with pre_bind_driver: pci-stub",
    "vfio_pci.ids": "pre_bind_ids with pre_bind_driver: vfio-pci",
}
ID_PARAMS = {"pci-stub": "pci-stub.ids", "vfio-pci": "vfio-pci.ids"}


def norm_name(name):
    return name.replace("-", "_")


def arg_name(arg):
    return arg.split("=", 1)[0]


def arg_value(arg):
    return arg.split("=", 1)[1] if "=" in arg else None


def arg_key(arg):
    return norm_name(arg_name(arg))


def make_arg(name, value):
    return name if value is None else "%s=%s" % (name, value)


def parse_size_kb(text):
    """``1G``/``1024M``/``1048576K``/``2m`` -> kB (the kernel's memparse); None if not a size."""
    match = re.match(r"^(\d+)([kKmMgG]?)\Z", str(text or "").strip())
    if not match:
        return None
    number, unit = int(match.group(1)), match.group(2).upper()
    if unit == "K":
        return number
    if unit == "M":
        return number * 1024
    if unit == "G":
        return number * 1024 * 1024
    return number // 1024


def validate_pci_ids(ids, option="pre_bind_ids"):
    """Lower-cased ``vendor:device`` ids as the kernel's ``ids=`` takes them (``10de:20b5``), order
    kept, duplicates dropped; InputError naming the bad one otherwise. Read by the one reader of a
    vendor:device input (vocabulary/pci_ids.py), so an id the host model takes from
    ``gpuvirt_gpu_pci_ids`` (``0x10de:0x20b5`` too) is taken here as well."""
    result = []
    for pci_id in ids or []:
        try:
            vendor, device = parse_vendor_device(str(pci_id).strip())
        except ValueError:
            raise InputError("%s: %r is not a vendor:device pair of 4-digit hex ids such as 10de:20b5 "
                             "(as lspci -nn prints them in brackets)" % (option, pci_id))
        text = "%s:%s" % (vendor[2:], device[2:])
        if text not in result:
            result.append(text)
    return result


def validate_new_arg(name, value, option="args"):
    check_line_value(name, option)
    check_line_value(value, option)
    if not name or not SAFE_ARG_RE.match(name) or "=" in name:
        raise InputError("%s: %r is not a kernel argument name; use letters, digits and ._- "
                         "(for example hugepagesz)" % (option, name))
    if value is not None and (value == "" or not SAFE_ARG_RE.match(value)):
        raise InputError("%s: the value %r of %s is empty or holds characters that /bin/sh or GRUB "
                         "would interpret (blanks, quotes, $, `, \\, ;, globs); kernel arguments here may "
                         "use letters, digits and ._,:/+@%%=~!^-" % (option, value, name))


# ---------------------------------------------------------------------------- operations
class Op:
    """One wanted property of the command line."""

    def apply(self, args):
        raise NotImplementedError


class SetArg(Op):
    """``name=value`` (or the flag ``name`` when value is None) present exactly once: the
    first arg of that name becomes it, in place, further ones go; appended when absent."""

    def __init__(self, name, value=None):
        self.name, self.value = name, value

    def apply(self, args):
        key, wanted = norm_name(self.name), make_arg(self.name, self.value)
        out, placed = [], False
        for arg in args:
            if arg_key(arg) != key:
                out.append(arg)
            elif not placed:
                # Keep the spelling already there when it says the same thing.
                out.append(arg if arg_value(arg) == self.value else wanted)
                placed = True
        if not placed:
            out.append(wanted)
        return out

    def __repr__(self):
        return "SetArg(%r)" % make_arg(self.name, self.value)


class RemoveArg(Op):
    """No arg ``name`` (any value when value is None, else only ``name=value``)."""

    def __init__(self, name, value=None):
        self.name, self.value = name, value

    def apply(self, args):
        key = norm_name(self.name)
        return [arg for arg in args
                if not (arg_key(arg) == key and (self.value is None or arg_value(arg) == self.value))]

    def __repr__(self):
        return "RemoveArg(%r)" % make_arg(self.name, self.value)


class OptionList(Op):
    """Args whose value is a comma-separated option list (``intel_iommu=on,sm_on``,
    ``iommu=pt``): ``add`` must be among the options of the first such arg (appended as a
    new arg when there is none), ``drop`` options go from every such arg (an arg left
    without options goes)."""

    def __init__(self, name, add=None, drop=()):
        self.name, self.add, self.drop = name, add, tuple(drop)

    def apply(self, args):
        key = norm_name(self.name)
        out, has_add, emitted = [], False, set()
        for arg in args:
            if arg_key(arg) != key:
                out.append(arg)
                continue
            options = [o for o in (arg_value(arg) or "").split(",") if o]
            kept = []
            for option in options:
                # an option an earlier arg of the name already gives is said once (off ... on: one on)
                if option not in self.drop and option not in emitted and option not in kept:
                    kept.append(option)
            if not kept and options and self.add is not None and not has_add:
                kept = [self.add]
            if self.add is not None and self.add in kept:
                has_add = True
            emitted.update(kept)
            if kept == options:
                out.append(arg)
            elif kept:
                out.append(make_arg(arg_name(arg), ",".join(kept)))
        if self.add is not None and not has_add:
            for index, arg in enumerate(out):
                if arg_key(arg) == key:
                    options = [o for o in (arg_value(arg) or "").split(",") if o]
                    out[index] = make_arg(arg_name(arg), ",".join([self.add] + options))
                    break
            else:
                out.append(make_arg(self.name, self.add))
        return out

    def __repr__(self):
        return "OptionList(%r, add=%r, drop=%r)" % (self.name, self.add, self.drop)


class MergeIds(Op):
    """``ids`` among the ids of ``param`` (``pci-stub.ids``), merged with those already
    there (order kept, new ones appended); they leave ``other`` (``vfio-pci.ids``) so that
    only one driver claims them. Several args of ``param`` become one."""

    def __init__(self, param, ids, other=None):
        self.param, self.ids, self.other = param, list(ids), other

    @staticmethod
    def _ids(arg):
        return [i for i in (arg_value(arg) or "").split(",") if i]

    def apply(self, args):
        key = norm_name(self.param)
        other_key = norm_name(self.other) if self.other else None
        wanted = {i.lower() for i in self.ids}
        merged, first, out = [], None, []
        for arg in args:
            if arg_key(arg) == key:
                for pci_id in self._ids(arg):
                    if pci_id.lower() not in [m.lower() for m in merged]:
                        merged.append(pci_id)
                if first is None:
                    first = len(out)
                    out.append(arg)
                continue
            if other_key and arg_key(arg) == other_key:
                ids = self._ids(arg)
                kept = [i for i in ids if i.lower() not in wanted]
                if kept == ids:
                    out.append(arg)
                elif kept:
                    out.append(make_arg(arg_name(arg), ",".join(kept)))
                continue
            out.append(arg)
        for pci_id in self.ids:
            if pci_id.lower() not in [m.lower() for m in merged]:
                merged.append(pci_id)
        if first is None:
            if merged:
                out.append(make_arg(self.param, ",".join(merged)))
        elif self._ids(out[first]) != merged:
            out[first] = make_arg(arg_name(out[first]), ",".join(merged))
        return out

    def __repr__(self):
        return "MergeIds(%r, %r)" % (self.param, self.ids)


class HugepageReservation(Op):
    """Boot-time hugepages of one size, as the kernel reads them: ``hugepages=`` counts
    for the ``hugepagesz=`` before it (the default size when there is none). With
    ``count`` a string (``4`` or ``0:2,1:2``) the pair is set; with ``count`` None and
    ``state`` absent the pair goes. ``size`` None means the default size."""

    def __init__(self, size, count, state="present", with_size=True):
        self.size, self.count, self.state, self.with_size = size, count, state, with_size
        self.size_kb = parse_size_kb(size) if size is not None else None

    @staticmethod
    def _pairs(args):
        """(index of hugepagesz or None, size_kb or None, [indexes of its hugepages])"""
        groups = [[None, None, []]]
        for index, arg in enumerate(args):
            key = arg_key(arg)
            if key == "hugepagesz":
                groups.append([index, parse_size_kb(arg_value(arg)), []])
            elif key == "hugepages":
                groups[-1][2].append(index)
        return groups

    def apply(self, args):
        groups = self._pairs(args)
        if self.size is None:
            mine = [groups[0]]
        else:
            mine = [g for g in groups[1:] if g[1] == self.size_kb]
        drop, replace, insert_after = set(), {}, None
        if self.state == "absent":
            for size_index, _kb, counts in mine:
                drop.update(counts)
                if self.with_size and size_index is not None:
                    drop.add(size_index)
            return [a for i, a in enumerate(args) if i not in drop]
        wanted = make_arg("hugepages", self.count)
        if mine:
            first = mine[0]
            for later in mine[1:]:  # the kernel ignores a size given twice: keep one
                if later[0] is not None:
                    drop.add(later[0])
                drop.update(later[2])
            if first[2]:
                replace[first[2][0]] = wanted
                drop.update(first[2][1:])
            elif first[0] is not None:
                insert_after = first[0]
            else:
                insert_after = -1  # default size, no hugepages= yet: before any hugepagesz
        out = []
        if insert_after == -1:
            out.append(wanted)
        for index, arg in enumerate(args):
            if index in drop:
                continue
            current = replace.get(index)
            out.append(arg if current is None or arg_value(arg) == arg_value(current) else current)
            if index == insert_after:
                out.append(wanted)
        if not mine:
            if self.size is not None:
                out.append(make_arg("hugepagesz", self.size))
            out.append(wanted)
        return out

    def __repr__(self):
        return "HugepageReservation(%r, %r, %r)" % (self.size, self.count, self.state)


class ConfigAcs(Op):
    """``pci=config_acs=VALUE`` (ACS per bridge, boot/acs.py) present exactly once: the kernel keeps
    the last ``config_acs`` it reads, so a ``pci=`` arg that gives one becomes this one, further
    ones go; other ``pci=`` args (``pci=realloc``) are left alone. With ``value`` None every
    ``config_acs`` arg goes. The args are the kernel's (a list's ``;`` as it is): the GRUB file's
    quoting is the bootloader edit's (bootloader.py, cmdline.grub_words)."""

    def __init__(self, value):
        self.value = value

    @staticmethod
    def _is_config_acs(arg):
        return arg_key(arg) == "pci" and (arg_value(arg) or "").startswith("config_acs=")

    def apply(self, args):
        wanted = None if self.value is None else make_arg("pci", "config_acs=" + self.value)
        out, placed = [], wanted is None
        for arg in args:
            if not self._is_config_acs(arg):
                out.append(arg)
            elif not placed:
                out.append(wanted)
                placed = True
        if not placed:
            out.append(wanted)
        return out

    def __repr__(self):
        return "ConfigAcs(%r)" % self.value


def apply_ops(ops, args):
    out = list(args)
    for op in ops:
        out = op.apply(out)
    return out


def pending_changes(ops, running_args):
    """(missing, unwanted): args the operations would add to / take from ``running_args``."""
    after = apply_ops(ops, running_args)
    missing = [a for a in after if a not in running_args]
    unwanted = [a for a in running_args if a not in after]
    return missing, unwanted


# ---------------------------------------------------------------------------- inputs
def iommu_ops(vendor, iommu=True, passthrough=None):
    """Operations for the IOMMU options. ``vendor`` is intel or amd."""
    if vendor not in ("intel", "amd"):
        raise InputError("vendor: %r is not a CPU vendor this module knows; use intel or amd" % (vendor,))
    if passthrough is None:
        passthrough = iommu
    if passthrough and not iommu:
        raise InputError("passthrough: true needs iommu: true (iommu=pt is a mode of the IOMMU); "
                         "set passthrough: false or iommu: true")
    ops = []
    if vendor == "intel":
        if iommu:
            ops.append(OptionList("intel_iommu", add="on", drop=("off",)))
        else:
            ops.append(SetArg("intel_iommu", "off"))
    else:
        if iommu:
            ops.append(OptionList("amd_iommu", drop=("off",)))
        else:
            ops.append(SetArg("amd_iommu", "off"))
    if passthrough:
        ops.append(OptionList("iommu", add="pt", drop=("nopt", "off")))
    else:
        ops.append(OptionList("iommu", drop=("pt",)))
    return ops


def pre_bind_ops(ids, driver):
    if driver not in ID_PARAMS:
        raise InputError("pre_bind_driver: %r is not pci-stub or vfio-pci" % (driver,))
    ids = validate_pci_ids(ids)
    if not ids:
        return []
    other = [p for d, p in ID_PARAMS.items() if d != driver][0]
    return [MergeIds(ID_PARAMS[driver], ids, other=other)]


def check_hugepage_value(key, value, where, sizes_kb=None):
    """What ``hugepagesz=``/``default_hugepagesz=`` and ``hugepages=`` mean: a page size the
    CPU has (``sizes_kb``: the sizes of /sys/kernel/mm/hugepages, None when unknown) and a
    count of pages (``4``, or ``0:2,1:2`` per node), never negative."""
    if value is None:
        return
    if key in ("hugepagesz", "default_hugepagesz"):
        size_kb = parse_size_kb(value)
        if size_kb is None:
            raise InputError("%s: %s=%s is not a size such as 2M or 1G" % (where, key, value))
        if sizes_kb is not None and size_kb not in sizes_kb:
            raise InputError("%s: %s=%s is a page size this CPU does not have (/sys/kernel/mm/hugepages lists %s); "
                             "use one of those" % (where, key, value,
                                                   ", ".join("%dkB" % kb for kb in sorted(sizes_kb)) or "none"))
    elif key == "hugepages" and not HUGEPAGES_COUNT_RE.match(value):
        raise InputError("%s: hugepages=%s is not a count of pages (a whole number such as 4, or NODE:COUNT pairs "
                         "such as 0:2,1:2); counts cannot be negative" % (where, value))


def args_ops(items, option="args", hugepage_sizes_kb=None):
    """Operations for a list of ``{name, value, state}``. ``hugepages`` right after a
    ``hugepagesz`` item is that size's reservation, as the kernel reads them.
    ``hugepage_sizes_kb``: the page sizes the host has (None: not checked)."""
    ops, seen = [], {}
    previous_size = None
    for position, item in enumerate(items or []):
        where = "%s[%d]" % (option, position)
        if not isinstance(item, dict):
            raise InputError("%s: %r is not a dict with name, value and state" % (where, item))
        name = item.get("name")
        value = item.get("value")
        value = None if value is None else str(value)
        state = item.get("state") or "present"
        if state not in ("present", "absent"):
            raise InputError("%s: state %r is not present or absent" % (where, state))
        validate_new_arg(str(name or ""), value, where)
        key = norm_name(name)
        if state == "present":
            check_hugepage_value(key, value, where, hugepage_sizes_kb)
        if key in MANAGED_NAMES:
            raise InputError("%s: %s is set by the %s option(s) of this module, not through args"
                             % (where, name, MANAGED_NAMES[key]))
        if key == "hugepagesz":
            ident = (key, parse_size_kb(value))
        elif key == "hugepages":
            ident = (key, parse_size_kb(previous_size) if previous_size else None)
        else:
            ident = (key, None)
        for other_value, other_state in seen.get(ident, []):
            same = other_value == value or other_value is None or value is None or key in ("hugepagesz", "hugepages")
            if other_state != state and same:
                raise InputError("%s: %s is asked both present and absent; keep one of them" % (where, make_arg(name, value)))
            if state == "present" and other_state == "present" and (other_value != value or key == "hugepagesz"):
                raise InputError("%s: %s is given twice (%s and %s); keep one"
                                 % (where, name, make_arg(name, other_value), make_arg(name, value)))
        seen.setdefault(ident, []).append((value, state))
        if key == "hugepagesz":
            size_kb = parse_size_kb(value)
            if value is not None and size_kb is None:
                raise InputError("%s: hugepagesz=%s is not a size such as 2M or 1G" % (where, value))
            if state == "absent":
                if value is None:
                    raise InputError("%s: hugepagesz absent needs the size to remove, such as 1G" % where)
                ops.append(HugepageReservation(value, None, "absent"))
                previous_size = None
            else:
                if value is None:
                    raise InputError("%s: hugepagesz needs a value such as 1G" % where)
                nxt = items[position + 1] if position + 1 < len(items) else None
                if not (isinstance(nxt, dict) and norm_name(nxt.get("name") or "") == "hugepages"):
                    ops.append(_EnsureSize(value))
                previous_size = value
            continue
        if key == "hugepages":
            if state == "absent":
                if value is None:
                    ops.append(HugepageReservation(previous_size, None, "absent", with_size=False))
                else:
                    ops.append(_RemoveCount(previous_size, value))
            else:
                if value is None:
                    raise InputError("%s: hugepages needs a count such as 4 or 0:2,1:2" % where)
                ops.append(HugepageReservation(previous_size, value))
            previous_size = None
            continue
        previous_size = None
        if state == "present":
            ops.append(SetArg(name, value))
        else:
            ops.append(RemoveArg(name, value))
    return ops


class _EnsureSize(Op):
    """``hugepagesz=SIZE`` present (without a count of its own)."""

    def __init__(self, size):
        self.size, self.size_kb = size, parse_size_kb(size)

    def apply(self, args):
        if any(arg_key(a) == "hugepagesz" and parse_size_kb(arg_value(a)) == self.size_kb for a in args):
            return list(args)
        return list(args) + [make_arg("hugepagesz", self.size)]


class _RemoveCount(Op):
    """``hugepages=VALUE`` of one size goes (only with that value)."""

    def __init__(self, size, value):
        self.size, self.value = size, value
        self.size_kb = parse_size_kb(size) if size is not None else None

    def apply(self, args):
        drop = set()
        for size_index, size_kb, counts in HugepageReservation._pairs(args):  # pylint: disable=protected-access
            if (size_index is None and self.size is None) or (size_index is not None and size_kb == self.size_kb):
                drop.update(i for i in counts if arg_value(args[i]) == self.value)
        return [a for i, a in enumerate(args) if i not in drop]
