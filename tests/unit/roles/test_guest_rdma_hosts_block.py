# -*- coding: utf-8 -*-
"""The marked block of the hosts file (module_utils guest/hosts_block, the guest_rdma role's): the text
ansible.builtin.blockinfile writes with the same marker (checked against blockinfile itself, run in
process), so hosts that the role's earlier blockinfile task wrote converge without a change. Here,
not under tests/unit/plugins/module_utils/: blockinfile is a module of ansible-core, which
ansible-test units keeps out of the module_utils tests."""

from __future__ import annotations

import os
import tempfile

import pytest
from ansible.modules import blockinfile
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import hosts_block as hb
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

from conftest import run_module  # pylint: disable=import-error

BEGIN = "# BEGIN gpuvirt.tenancy guest_rdma\n"
END = "# END gpuvirt.tenancy guest_rdma\n"
LAB = ["192.168.83.10 tenant-a-rdma", "192.168.84.10 tenant-b-rdma"]
LAB_BLOCK = BEGIN + "192.168.83.10 tenant-a-rdma\n192.168.84.10 tenant-b-rdma\n" + END
# what the role's blockinfile task left on the lab VM (Debian 12's /etc/hosts, then the block)
DEBIAN = "127.0.0.1\tlocalhost\n127.0.1.1\tgpuvirt-lab\n\n::1     localhost ip6-localhost ip6-loopback\n"


def blockinfile_writes(text, lines, marker=hb.DEFAULT_MARKER):
    """What ansible.builtin.blockinfile makes of ``text`` with the block the role's template
    rendered (one line per entry, each ending in a newline)."""
    handle, path = tempfile.mkstemp()
    try:
        with os.fdopen(handle, "w", newline="") as out:
            out.write(text)
        block = "".join(line + "\n" for line in lines)
        result = run_module(blockinfile.main, {"path": path, "marker": marker, "block": block})
        assert not result.get("failed"), result
        with open(path, newline="") as written:
            return written.read()
    finally:
        os.unlink(path)


@pytest.mark.parametrize("text, lines, wanted", [
    ("", LAB, LAB_BLOCK),
    (DEBIAN, LAB, DEBIAN + LAB_BLOCK),
    (DEBIAN.rstrip("\n"), LAB, DEBIAN + LAB_BLOCK),
    # converged: the same text
    (DEBIAN + LAB_BLOCK, LAB, DEBIAN + LAB_BLOCK),
    # replaced where it is, lines after it kept
    (BEGIN + "10.0.0.1 old-rdma\n" + END + DEBIAN, LAB, LAB_BLOCK + DEBIAN),
    # reversed markers: from the END to the BEGIN line
    (END + "x\n" + BEGIN + DEBIAN, LAB, LAB_BLOCK + DEBIAN),
    # one marker only: a new block at the end, the stray marker kept
    (BEGIN + DEBIAN, LAB, BEGIN + DEBIAN + LAB_BLOCK),
    # two blocks: the last BEGIN and the last END delimit the one replaced
    (LAB_BLOCK + DEBIAN + BEGIN + "10.0.0.9 x\n" + END, ["10.0.0.1 a"], LAB_BLOCK + DEBIAN + BEGIN + "10.0.0.1 a\n" + END),
    # no entries: the block goes, nothing else changes
    (DEBIAN + LAB_BLOCK, [], DEBIAN),
    (LAB_BLOCK + DEBIAN, [], DEBIAN),
    (DEBIAN, [], DEBIAN),
    ("", [], ""),
])
def test_render_block(text, lines, wanted):
    assert hb.render_block(text, lines) == wanted
    assert hb.render_block(wanted, lines) == wanted
    assert blockinfile_writes(text, lines) == wanted


def test_a_file_without_a_final_newline_and_no_block_stays_as_it_is():
    """The one deliberate difference: blockinfile adds a newline to the last line even when it
    writes no block (a change that is not one); this leaves the file alone."""
    text = DEBIAN.rstrip("\n")
    assert hb.render_block(text, []) == text
    assert blockinfile_writes(text, []) == text + "\n"


def test_an_unterminated_end_marker_is_still_the_end_of_the_block():
    """blockinfile only knows marker lines with their newline: it would append a second block."""
    text = DEBIAN + BEGIN + "10.0.0.1 old\n" + END.rstrip("\n")
    assert hb.render_block(text, LAB) == DEBIAN + LAB_BLOCK
    assert blockinfile_writes(text, LAB) == text + "\n" + LAB_BLOCK


def test_crlf_file_keeps_its_lines_and_finds_its_markers():
    text = "127.0.0.1 localhost\r\n" + BEGIN.replace("\n", "\r\n") + "10.0.0.1 old\r\n" + END.replace("\n", "\r\n")
    assert hb.render_block(text, LAB) == "127.0.0.1 localhost\r\n" + LAB_BLOCK


HOST_LINE = st.builds(lambda a, n: "10.0.0.%d %s" % (a, n), st.integers(0, 255), st.from_regex(r"[a-z]{1,6}", fullmatch=True))
FILE_LINE = st.one_of(HOST_LINE, st.just(BEGIN.rstrip("\n")), st.just(END.rstrip("\n")), st.just(""),
                      st.from_regex(r"# [a-z ]{0,12}", fullmatch=True))


@settings(max_examples=80, deadline=None)
@given(st.lists(FILE_LINE, max_size=8), st.booleans(), st.lists(HOST_LINE, max_size=3))
def test_same_text_as_blockinfile(file_lines, final_newline, lines):
    text = "\n".join(file_lines) + ("\n" if file_lines and final_newline else "")
    # the deliberate differences, each tested on its own: an unterminated last line is left as it
    # is when no block is written, and found as a marker when it is one
    assume(not text or text.endswith("\n") or (lines and file_lines[-1] + "\n" not in (BEGIN, END)))
    # more than one marker pair is no file this collection writes, and blockinfile itself
    # treats it differently across ansible-core releases (2.16 against 2.19)
    assume(file_lines.count(BEGIN.rstrip("\n")) <= 1 and file_lines.count(END.rstrip("\n")) <= 1)
    out = hb.render_block(text, lines)
    assert out == blockinfile_writes(text, lines)
    assert hb.render_block(out, lines) == out


def test_block_lines_in_order_with_canonical_addresses():
    entries = [{"ip": "192.168.83.10", "names": ["tenant-a-rdma"]},
               {"ip": "FD00:B:0:0::10", "names": ["tenant-b-rdma", "tenant-b-rdma.lab.example"]},
               {"ip": " 10.0.0.1 ", "names": ["node_1"]}]
    assert hb.block_lines(entries) == ["192.168.83.10 tenant-a-rdma", "fd00:b::10 tenant-b-rdma tenant-b-rdma.lab.example",
                                       "10.0.0.1 node_1"]


@pytest.mark.parametrize("entries, match", [
    ([{"ip": "192.168.83.300", "names": ["a"]}], "hosts_entries[0].ip: '192.168.83.300' is not an IPv4 or IPv6 address"),
    ([{"ip": "", "names": ["a"]}], "hosts_entries[0].ip: '' is not an IPv4 or IPv6 address"),
    ([{"ip": None, "names": ["a"]}], "hosts_entries[0].ip"),
    ([{"ip": "10.0.0.1\n10.0.0.2", "names": ["a"]}], "control character"),
    ([{"ip": "10.0.0.1", "names": []}], "hosts_entries[0].names: give at least one name for 10.0.0.1"),
    ([{"ip": "10.0.0.1", "names": ["a b"]}], "hosts_entries[0].names: 'a b' is not a host name"),
    ([{"ip": "10.0.0.1", "names": ["a#b"]}], "is not a host name"),
    ([{"ip": "10.0.0.1", "names": ["-a"]}], "is not a host name"),
    ([{"ip": "10.0.0.1", "names": ["a..b"]}], "is not a host name"),
    ([{"ip": "10.0.0.1", "names": ["x" * 64]}], "is not a host name"),
    ([{"ip": "10.0.0.1", "names": ["a\nb"]}], "control character"),
    ([{"ip": "10.0.0.1", "names": ["a"]}, {"ip": "10.0.0.2", "names": ["A"]}],
     "hosts_entries[1].names: A is given twice (for 10.0.0.1 and for 10.0.0.2)"),
])
def test_bad_entries_are_refused_naming_the_entry(entries, match):
    with pytest.raises(InputError) as raised:
        hb.block_lines(entries)
    assert match in str(raised.value)


@pytest.mark.parametrize("marker, match", [
    ("# gpuvirt block", "has no {mark}"),
    ("{mark} block", "does not start with '#'"),
    ("# {mark}\nblock", "control character"),
])
def test_bad_marker_is_refused(marker, match):
    with pytest.raises(InputError) as raised:
        hb.check_marker(marker)
    assert match in str(raised.value)


@pytest.mark.parametrize("text, found", [
    (DEBIAN + LAB_BLOCK, LAB),
    (LAB_BLOCK + DEBIAN, LAB),
    (DEBIAN, []),
    (None, []),
    ("", []),
    # a block with no lines, or with CRLF endings: writing any lines rewrites it
    (DEBIAN + BEGIN + END, None),
    (DEBIAN + LAB_BLOCK.replace("\n", "\r\n"), None),
    # only one marker: no block (render_block appends one)
    (DEBIAN + BEGIN, []),
])
def test_block_found(text, found):
    assert hb.block_found(text) == found


@settings(max_examples=80, deadline=None)
@given(st.lists(FILE_LINE, max_size=8), st.booleans(), st.lists(HOST_LINE, max_size=3))
def test_lines_equal_to_the_found_ones_change_nothing_and_others_change_the_file(file_lines, final_newline, lines):
    """What a caller that compares wanted lines with block_found relies on."""
    text = "\n".join(file_lines) + ("\n" if file_lines and final_newline else "")
    found = hb.block_found(text)
    if found is not None:
        assert hb.render_block(text, found) == text
    assert (hb.render_block(text, lines) == text) is (lines == found)
