# -*- coding: utf-8 -*-
"""Replace one "## " section of a Markdown file (the benchmarks' --write), keeping the others."""

from __future__ import absolute_import, division, print_function

import os


def write_section(path, section):
    """Write `section` (Markdown text starting with its "## " heading) into `path`: in place of
    the section with the same heading, or at the end when there is none."""
    heading = section.splitlines()[0].strip()
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    if not text.strip():
        text = "# Benchmarks\n\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        new = "".join(lines[:start]) + section + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(new.rstrip("\n") + "\n")
