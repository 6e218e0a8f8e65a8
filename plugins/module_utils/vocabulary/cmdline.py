# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel command line (``/proc/cmdline``, a GRUB variable's value) as a list of args,
split the one way the kernel splits it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def split_cmdline(text):
    """Split a kernel command line the way the kernel does: on blanks, keeping double-quoted
    values (``foo="a b"``) together."""
    args, current, quoted = [], [], False
    for char in (text or "").strip():
        if char == '"':
            quoted = not quoted
            current.append(char)
        elif char.isspace() and not quoted:
            if current:
                args.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        args.append("".join(current))
    return args


def join_cmdline(args):
    return " ".join(args)


def kernel_part(args):
    """The args the kernel itself reads: those before ``--`` (the rest go to init)."""
    args = list(args)
    return args[:args.index("--")] if "--" in args else args
