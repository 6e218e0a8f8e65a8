# -*- coding: utf-8 -*-
"""preflight_text: the batches around a stopped batch, from the play's hosts in rollout order; text
wrapped or cut to lines a terminal holds."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.preflight.text import LINE_CHARS, batches_around, partition_line, shorten, wrap


@pytest.mark.parametrize("batch, play_hosts, expected", [
    (["h3", "h4"], ["h1", "h2", "h3", "h4", "h5"], (["h1", "h2"], ["h5"])),
    (["h1"], ["h1", "h2"], ([], ["h2"])),
    (["h2"], ["h1", "h2"], (["h1"], [])),
    (["lab"], ["lab"], ([], [])),
    # a batch the play does not list (a host added at run time), or none: no batches around it
    (["new"], ["h1", "h2"], ([], [])),
    ([], ["h1"], ([], [])),
])
def test_batches_around(batch, play_hosts, expected):
    assert batches_around(batch, play_hosts) == expected


REASON = "no NUMA node can hold tenant huge (numa: required): " + "; ".join(
    "GPUs short on node %d: 0 free of 0, 9 needed, VFs short on node %d: 0 free of 0, 1 needed" % (n, n) for n in range(8))


@pytest.mark.parametrize("text", [
    "short", REASON, "  - huge does not fit: " + REASON, "word " * 80, "a, " * 100,
    "x" * 400,  # one word longer than a line: cut into pieces
    "",
])
def test_wrap_keeps_every_word_in_lines_a_terminal_holds(text):
    lines = wrap(text)
    assert all(len(line) <= LINE_CHARS for line in lines)
    assert all(line.startswith("    ") for line in lines[1:])
    if " " in text.strip():  # the same words in the same order
        assert " ".join(" ".join(lines).split()) == " ".join(text.split())
    else:  # one word: its pieces, in order
        assert "".join(line.strip() for line in lines) == text


def test_wrap_breaks_after_a_clause_first():
    lines = wrap(REASON, width=100, indent="  ")
    assert lines[0].endswith(",") or lines[0].endswith(";")
    assert all(line.rstrip()[-1] in ",;" for line in lines[:-1]) and lines[-1].endswith("1 needed")


@pytest.mark.parametrize("text, expected", [
    ("short", "short"),
    ("a" * 50 + ", " + "b" * 50 + "; " + "c" * 100, "a" * 50 + ", " + "b" * 50 + " ... (whole in the report)"),
    ("word " * 60, ("word " * 26).rstrip() + " ... (whole in the report)"),  # no clause in the room: at a space
])
def test_shorten_cuts_at_a_clause_within_the_line(text, expected):
    assert shorten(text) == expected and len(shorten(text)) <= LINE_CHARS


def test_partition_line_names_the_partition_its_gpus_and_their_modules():
    partition = {"id": 5, "gpus": ["0000:3b:00.0", "0000:4c:00.0"], "physical_ids": [5, 7], "board": "HGX H100/H200 8-GPU"}
    assert partition_line("h-e", partition) == (
        "h-e NVSwitch partition 5 of the HGX H100/H200 8-GPU board, GPUs 0000:3b:00.0 (module 5), 0000:4c:00.0 (module 7): "
        "the Fabric Manager (in the service VM, gpuvirt_fabric_vm) must activate it before the tenant starts")
    unknown = {"id": None, "gpus": ["0000:19:00.0"], "physical_ids": [], "board": "HGX H100/H200 8-GPU", "why": "policy.gpu_modules not given"}
    assert partition_line("one", unknown) == ("one NVSwitch partition unknown on the HGX H100/H200 8-GPU board, GPUs 0000:19:00.0 "
                                              "(module ?): policy.gpu_modules not given")
