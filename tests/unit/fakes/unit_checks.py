# -*- coding: utf-8 -*-
"""Checks of generated boot files as their readers take them: systemd units through the real
``systemd-analyze verify`` (the Debian package systemd, in scripts/bootstrap.sh's list), udev
rules through a strict parser of udev-rules(7)'s syntax.

Why a parser for udev: ``udevadm verify`` arrived in systemd 254; Debian 12 has 252, whose
``udevadm test`` needs a device in a running udev, so the rules are parsed here the way
``udev-rules.c`` (systemd 252, ``parse_line``) reads them: comma-separated ``KEY[{ATTR}]OP"VALUE"``
tokens, OP one of ``== != = += -= :=``, the value in double quotes, where a quote inside ends
the value unless a backslash comes before it. Anything left over is an error, as it is for
udev ("Invalid key/value pair, ignoring.")."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

TOKEN = re.compile(r'\s*(?P<key>[A-Z_]+)(?:\{(?P<attr>[^}]*)\})?\s*(?P<op>==|!=|\+=|-=|:=|=)\s*'
                   r'"(?P<value>(?:[^"\\]|\\.)*)"\s*(?:,|$)')


class UdevSyntaxError(ValueError):
    pass


def udev_rules(text):
    """[[(key, attr, op, value), ...] per rule line] of a rules file; a line udev would not
    read as a whole is a :class:`UdevSyntaxError`."""
    rules = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens, position = [], 0
        while position < len(line):
            match = TOKEN.match(line, position)
            if not match:
                raise UdevSyntaxError("line %d: cannot read %r" % (number, line[position:]))
            tokens.append((match.group("key"), match.group("attr"), match.group("op"), match.group("value")))
            position = match.end()
        rules.append(tokens)
    return rules


def systemd_analyze():
    path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze is missing: install the Debian package systemd (scripts/bootstrap.sh lists it)"
    return path


def systemd_verify(unit_paths):
    """``systemd-analyze verify`` over unit files (copied into one directory, as systemd loads
    a unit by its file name): (rc, output)."""
    directory = os.path.dirname(unit_paths[0])
    proc = subprocess.run([systemd_analyze(), "verify"] + [os.path.join(directory, os.path.basename(p)) for p in unit_paths],
                          capture_output=True, text=True, check=False, env=dict(os.environ, SYSTEMD_LOG_LEVEL="notice"),
                          timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def systemd_escape_path(path):
    """``systemd-escape --path``, the real program."""
    return subprocess.run(["systemd-escape", "--path", "--", path], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()
