# -*- coding: utf-8 -*-
"""A generated block of a Markdown page (the bad-input tables of docs/reliability.md): read it
back for the test that compares it with its list, and write it in place from that list."""

from __future__ import annotations


def documented_block(doc, begin, end):
    """The text of ``doc`` from the line ``begin`` to ``end``, both included."""
    with open(doc, encoding="utf-8") as handle:
        text = handle.read()
    return text[text.index(begin):text.index(end) + len(end)]


def write_block(doc, begin, end, block):
    """Replace that part of ``doc`` with ``block`` (which starts with ``begin`` and ends with ``end``)."""
    with open(doc, encoding="utf-8") as handle:
        current = handle.read()
    with open(doc, "w", encoding="utf-8") as handle:
        handle.write(current[:current.index(begin)] + block + current[current.index(end) + len(end):])
