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


# GRUB's script language (grub-core/script/yylex.l, GRUB 2.06): a word is made of characters other
# than these ({CHAR}), single-quoted strings ({SQSTR}: every byte up to the next ' is literal, the
# quotes go), double-quoted strings, escapes and variables; ";" is a token of its own that ends the
# command. 10_linux copies GRUB_CMDLINE_LINUX and GRUB_CMDLINE_LINUX_DEFAULT into each entry's
# ``linux`` line as they are, so the variables' words are read by these rules before the kernel sees
# them (grub-core/lib/cmdline.c then joins the args with blanks, quoting only args with a blank).
GRUB_SPECIAL = set("{}|&$;<>'\"\\")


def _grub_scan(word):
    """(what GRUB's lexer keeps of ``word`` reading its single quotes, whether a ``;`` outside them
    ends the command inside it): single-quoted runs lose their quotes, their bytes literal, ``;``
    too; the part before an unquoted ``;`` is kept."""
    out, quoted = [], False
    for char in word:
        if char == "'":
            quoted = not quoted
        elif char == ";" and not quoted:
            return "".join(out), True
        else:
            out.append(char)
    return "".join(out), False


def grub_read(word):
    """The arg GRUB's lexer makes of one word of a ``linux`` line, where that differs from the
    word only by single quotes or a ``;``: single-quoted runs lose their quotes (their bytes
    literal, ``;`` too), and an unquoted ``;`` ends the command, so the arg is the part before
    it. A word with double quotes, backslashes or ``$`` is returned as it is (the kernel's own
    double quotes are read as before)."""
    if "'" not in word and ";" not in word:
        return word
    if any(char in word for char in '"\\$') or word.count("'") % 2:
        return word
    return _grub_scan(word)[0]


def grub_cut(word):
    """True when GRUB ends the command inside ``word``: a ``;`` outside single quotes."""
    return _grub_scan(word)[1]


def grub_word(arg):
    """The word that GRUB's lexer reads back as ``arg``: the arg itself when GRUB reads none of
    its characters specially, else the arg in single quotes. ValueError for an arg that no
    single quotes can hold (a quote, a blank, a newline) or that mixes the kernel's double
    quotes with GRUB's special characters."""
    if not GRUB_SPECIAL.intersection(arg):
        return arg
    if "'" in arg or '"' in arg or any(char.isspace() for char in arg):
        raise ValueError("%r holds a quote or a blank beside a character that GRUB's script language reads "
                         "specially (%s)" % (arg, "".join(sorted(GRUB_SPECIAL.intersection(arg)))))
    return "'%s'" % arg


def grub_words(args, words):
    """The words for ``args`` in a GRUB cmdline variable that held ``words``: an arg keeps the
    spelling of a word that GRUB reads as that arg (the first one not taken yet, and not one that
    GRUB cuts), any other arg is written as :func:`grub_word` gives it. ValueError as there."""
    pool, out = list(words), []
    for arg in args:
        for index, word in enumerate(pool):
            if word is not None and grub_read(word) == arg and not grub_cut(word):
                out.append(word)
                pool[index] = None
                break
        else:
            out.append(grub_word(arg))
    return out
