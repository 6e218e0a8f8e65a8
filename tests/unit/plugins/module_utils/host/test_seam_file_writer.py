# -*- coding: utf-8 -*-
"""Property tests (hypothesis) over the file writers and the GRUB editor: generated files with
CRLF, comments, quoting styles, ``export``, ``+=``, symlinks and non-UTF-8 bytes. What holds:
only the bytes of the changed setting change, the file shell-sources the same way before and
after except for the change (bash in a subprocess), and a second edit changes nothing. Runs are
bounded (max_examples) so the unit suite stays quick."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest import nccl_conf
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import join_cmdline, split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import (
    InputError, atomic_write, check_line_value, read_text)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub_defaults import GrubDefaults

BOUNDED = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# each example of the GRUB property runs bash twice
WITH_BASH = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
VAR = "GRUB_CMDLINE_LINUX"
OTHERS = ("GRUB_DEFAULT", "GRUB_TIMEOUT", "GRUB_CMDLINE_LINUX_DEFAULT", "GRUB_DISTRIBUTOR")

words = st.from_regex(r"[a-z][a-z0-9_.]{0,6}(=[a-z0-9,:.]{1,6})?", fullmatch=True)
arg_lists = st.lists(words, max_size=5)


def quoted(value, style):
    if style == "single":
        return "'%s'" % value
    if style == "plain" and value and " " not in value:
        return value
    return '"%s"' % value


@st.composite
def grub_files(draw):
    """(text, newline): comments, other variables in every quoting style, the cmdline variable
    assigned once (maybe exported) and maybe appended to with +=."""
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    lines = []
    for name in draw(st.lists(st.sampled_from(OTHERS), unique=True, max_size=3)):
        style = draw(st.sampled_from(["single", "double", "plain"]))
        lines.append("%s=%s" % (name, quoted(join_cmdline(draw(arg_lists)), style)))
    for _line in range(draw(st.integers(0, 2))):
        lines.append("# " + draw(st.text(st.characters(min_codepoint=32, max_codepoint=0x2ff,
                                                       blacklist_characters="\x7f\x85"), max_size=20)))
    style = draw(st.sampled_from(["single", "double", "plain"]))
    export = draw(st.sampled_from(["", "export "]))
    position = draw(st.integers(0, len(lines)))
    lines.insert(position, "%s%s=%s" % (export, VAR, quoted(join_cmdline(draw(arg_lists)), style)))
    for _line in range(draw(st.integers(0, 2))):
        lines.append('%s+=%s' % (VAR, quoted(" " + join_cmdline(draw(arg_lists)), draw(st.sampled_from(["single", "double"])))))
    return newline.join(lines) + newline, newline


def sourced(path, names):
    """What bash gives each name after sourcing the file (set -a, as grub-mkconfig exports)."""
    script = 'set -a; . "$1"; for n in %s; do printf "%%s=%%s\\0" "$n" "${!n}"; done' % " ".join(names)
    out = subprocess.run(["bash", "-c", script, "bash", path], capture_output=True, check=True,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}).stdout.decode("utf-8")
    return dict(item.split("=", 1) for item in out.split("\0") if item)


def lines_outside(text, name):
    return [line for line in text.splitlines(True) if name not in line]


@WITH_BASH
@given(grub_files(), arg_lists)
def test_grub_edit_keeps_other_bytes_sources_to_the_wanted_value_and_is_idempotent(tmp_path, generated, wanted):
    text, newline = generated
    grub = GrubDefaults(text)
    current = split_cmdline(grub.value(VAR))
    path = str(tmp_path / "grub")
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    before = sourced(path, (VAR,) + OTHERS)
    # bash keeps the \r of a CRLF line in the value; the kernel command line splits it away
    assert split_cmdline(before[VAR]) == current
    value = join_cmdline(wanted)
    after = grub.with_value(VAR, value)
    assert lines_outside(after, VAR) == lines_outside(text, VAR)            # only the setting's bytes change
    assert all(line.endswith(newline) for line in after.splitlines(True))   # CRLF stays CRLF
    atomic_write(path, after)
    now = sourced(path, (VAR,) + OTHERS)
    assert split_cmdline(now[VAR]) == wanted
    assert dict((n, now[n]) for n in OTHERS) == dict((n, before[n]) for n in OTHERS)
    assert GrubDefaults(after).with_value(VAR, value) == after             # idempotent


@BOUNDED
@given(grub_files(), st.sampled_from([["intel_iommu=off", "intel_iommu=on"], ["intel_iommu=on", "intel_iommu=off"],
                                      ["iommu=off", "iommu=pt"], ["intel_iommu=off", "iommu=pt", "intel_iommu=on,sm_on"]]))
def test_an_off_on_pair_becomes_one_right_value(generated, pair):
    args = split_cmdline(GrubDefaults(generated[0]).value(VAR)) + pair
    out = kernel_args.apply_ops(kernel_args.iommu_ops("intel", True, True), args)
    options = [o for a in out if a.startswith("intel_iommu=") for o in a.split("=", 1)[1].split(",")]
    assert "on" in options and "off" not in options and len(options) == len(set(options))
    assert [a for a in out if a.startswith("iommu=")] == ["iommu=pt"]
    assert kernel_args.apply_ops(kernel_args.iommu_ops("intel", True, True), out) == out


@st.composite
def nccl_files(draw):
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    keys = st.sampled_from(["NCCL_DEBUG", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME", "NCCL_IB_TC"])
    lines = []
    for _line in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["comment", "setting", "blank"]))
        if kind == "comment":
            lines.append("# " + draw(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=15)))
        elif kind == "setting":
            lines.append("%s%s=%s" % (draw(keys), draw(st.sampled_from(["", " "])), draw(st.from_regex(r"[a-z0-9_:]{0,6}", fullmatch=True))))
        else:
            lines.append("")
    end = newline if draw(st.booleans()) or not lines else ""
    return newline.join(lines) + end, newline


@BOUNDED
@given(nccl_files(), st.dictionaries(st.sampled_from(["NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL"]),
                                     st.one_of(st.none(), st.from_regex(r"[A-Za-z0-9_:]{1,6}", fullmatch=True))))
def test_nccl_conf_keeps_other_lines_writes_managed_ones_lf_and_is_idempotent(generated, wanted):
    text, newline = generated
    after = nccl_conf.render_conf(text, wanted)
    untouched = [line for line in text.splitlines(True)
                 if not any(line.lstrip().startswith(key) for key in wanted)]
    kept = [line for line in after.splitlines(True) if not any(line.lstrip().startswith(key) for key in wanted)]
    assert [l.rstrip("\r\n") for l in kept] == [l.rstrip("\r\n") for l in untouched]
    assert kept[:-1] == untouched[:-1]
    parsed = nccl_conf.parse_conf(after)
    for key, value in wanted.items():
        assert parsed.get(key) == value
    for key, value in wanted.items():
        # NCCL reads up to the \n only and splits at the first '=': a managed line is KEY=VALUE and LF
        managed = [line for line in after.splitlines(True) if line.lstrip().startswith(key)]
        assert managed == ([] if value is None else ["%s=%s\n" % (key, value)]) or (
            managed == ["%s=%s" % (key, value)] and after.endswith(managed[0])), (key, managed)
    assert nccl_conf.render_conf(after, wanted) == after


@BOUNDED
@given(st.text(st.characters(min_codepoint=1, max_codepoint=0x2ff), max_size=60), st.sampled_from(["\n", "\r\n"]))
def test_atomic_write_through_a_symlink_edits_the_target_byte_for_byte(tmp_path, body, newline):
    content = body.replace("\r", "").replace("\n", newline)
    target_dir = tmp_path / "real"
    target_dir.mkdir(exist_ok=True)
    target = target_dir / "grub"
    target.write_bytes(b"old\n")
    link = tmp_path / "grub-link"
    if not os.path.lexists(str(link)):
        os.symlink(str(target), str(link))
    atomic_write(str(link), content)
    assert os.path.islink(str(link)) and os.readlink(str(link)) == str(target)
    assert target.read_bytes() == content.encode("utf-8")
    assert read_text(str(link)) == content


@BOUNDED
@given(st.binary(min_size=1, max_size=40))
def test_a_file_that_is_not_utf8_is_an_input_error_naming_the_option(tmp_path, data):
    path = tmp_path / "file"
    path.write_bytes(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(InputError, match="grub_file: /etc/default/grub is not UTF-8"):
            read_text(str(path), option="grub_file", shown="/etc/default/grub")
    else:
        assert read_text(str(path), option="grub_file") == text


@BOUNDED
@given(st.text(max_size=30))
def test_check_line_value_refuses_exactly_the_control_characters(text):
    controls = [c for c in text if ord(c) < 0x20 or c in "\x7f\x85\u2028\u2029"]
    if controls:
        with pytest.raises(InputError, match="opt: "):
            check_line_value(text, "opt")
    else:
        assert check_line_value(text, "opt") == text
