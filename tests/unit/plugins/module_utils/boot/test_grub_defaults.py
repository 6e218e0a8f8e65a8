# -*- coding: utf-8 -*-
"""The GRUB defaults parser/editor (grub_defaults): real distribution files (tests/fixtures/boot), refusals,
quoting styles, and properties over generated files, each result sourced by the real /bin/sh."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args as ka
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import join_cmdline, split_cmdline
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub_defaults import GrubDefaults, GrubParseError, sourced_value

BOOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "boot")
UBUNTU_TEMPLATE = "etc-default-grub_TEMPLATE_ubuntu-22.04-jammy_grub2-2.06-2ubuntu7.2.txt"
CENTOS9 = "etc-default-grub_centos-stream9_default.txt"
UNSET = "\x01unset\x01"


def fixture(name):
    with open(os.path.join(BOOT, name), encoding="utf-8") as handle:
        return handle.read()


def ubuntu_rendered():
    """The template rendered the way Ubuntu 22.04 amd64's debian/rules does (see the
    fixture's .source.txt): the two sed substitutions, then GRUB_TIMEOUT_STYLE=hidden
    inserted before GRUB_TIMEOUT."""
    text = fixture(UBUNTU_TEMPLATE).replace("@DEFAULT_CMDLINE@", "quiet splash").replace("@DEFAULT_TIMEOUT@", "0")
    return text.replace("\nGRUB_TIMEOUT=", "\nGRUB_TIMEOUT_STYLE=hidden\nGRUB_TIMEOUT=", 1)


def sh_source(text, names):
    """Source ``text`` with the real /bin/sh and print the variables, NUL-separated."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grub")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        script = ('. "$1" >/dev/null 2>&1 || exit 97; shift; for n in "$@"; do '
                  'eval "if [ -n \\"\\${$n+x}\\" ]; then printf \'%s\\0\' \\"\\$$n\\"; else printf \'%s\\0\' \'' + UNSET + '\'; fi"; done')
        done = subprocess.run(["/bin/sh", "-c", script, "sh", path] + list(names), capture_output=True, cwd=tmp,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=30, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr, text)
    values = done.stdout.decode("utf-8").split("\0")[:-1]
    return dict(zip(names, values))


def edit(text, ops, name="GRUB_CMDLINE_LINUX"):
    grub = GrubDefaults(text)
    wanted = ka.apply_ops(ops, split_cmdline(grub.value(name) or ""))
    return grub.with_value(name, join_cmdline(wanted)), wanted


LAB_OPS = ka.iommu_ops("intel") + ka.pre_bind_ops(["1234:11e8"], "pci-stub") + ka.args_ops(
    [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "1:1"}])


# ---------------------------------------------------------------------------- real files
@pytest.mark.parametrize("name, text_of", [
    ("ubuntu 22.04 rendered", ubuntu_rendered),
    ("ubuntu 22.04 template", lambda: fixture(UBUNTU_TEMPLATE)),
    ("centos stream 9", lambda: fixture(CENTOS9)),
])
@pytest.mark.parametrize("variable", ["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"])
def test_real_files_edit_one_value(name, text_of, variable):
    text = text_of()
    grub = GrubDefaults(text)
    names = sorted({a.name for a in grub.assignments})
    before_values = sh_source(text, names + [variable])
    after, wanted = edit(text, LAB_OPS, variable)
    # Every other line is byte for byte what it was.
    old_lines, new_lines = text.splitlines(True), after.splitlines(True)
    if variable in names:
        assert len(old_lines) == len(new_lines), name
        differing = [i for i, (a, b) in enumerate(zip(old_lines, new_lines)) if a != b]
        assert len(differing) == 1
        assert old_lines[differing[0]].startswith(variable + "=")
    else:  # not set in the file: one line appended
        assert after.startswith(text) and new_lines[len(old_lines):] == ['%s="%s"\n' % (variable, " ".join(wanted))]
    # /bin/sh gives the intended args, and every other variable as before.
    after_values = sh_source(after, names + [variable])
    assert split_cmdline(after_values.pop(variable)) == wanted
    before_values.pop(variable)
    assert after_values == before_values
    # Idempotent.
    again = edit(after, LAB_OPS, variable)[0]
    assert again == after


def test_centos9_values():
    grub = GrubDefaults(fixture(CENTOS9))
    first_two = split_cmdline(grub.value("GRUB_CMDLINE_LINUX"))[:2]
    assert first_two == ["crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M", "resume=/dev/mapper/cs-swap"]
    assert grub.value("GRUB_ENABLE_BLSCFG") == "true"
    with pytest.raises(GrubParseError, match="GRUB_DISTRIBUTOR is built from shell expansion"):
        grub.value("GRUB_DISTRIBUTOR")


def test_ubuntu_template_backquote_distributor():
    grub = GrubDefaults(fixture(UBUNTU_TEMPLATE))
    with pytest.raises(GrubParseError, match="shell expansion .*lsb_release"):
        grub.value("GRUB_DISTRIBUTOR")
    assert grub.value("GRUB_CMDLINE_LINUX") == ""
    assert grub.value("GRUB_BADRAM") is None  # commented out


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("text, message", [
    ('GRUB_CMDLINE_LINUX="quiet\n', "unbalanced double quote"),
    ("GRUB_CMDLINE_LINUX='quiet\n", "unbalanced single quote"),
    ('A=`date\nGRUB_CMDLINE_LINUX=""\n', "unbalanced backquote"),
    ('A="$(echo x"\nGRUB_CMDLINE_LINUX=""\n', r"unbalanced"),
    ('GRUB_CMDLINE_LINUX="a"\nGRUB_CMDLINE_LINUX="b"\n', "sets GRUB_CMDLINE_LINUX 2 times"),
    ('GRUB_CMDLINE_LINUX="a"\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX b"\n', "2 times"),
    ('GRUB_CMDLINE_LINUX="$EXTRA quiet"\n', "built from shell expansion"),
    ('GRUB_CMDLINE_LINUX="${EXTRA:-x} quiet"\n', "built from shell expansion"),
    ('GRUB_CMDLINE_LINUX="$(cat /etc/kargs)"\n', "built from shell expansion"),
    ("GRUB_CMDLINE_LINUX=`cat /etc/kargs`\n", "built from shell expansion"),
    ("GRUB_CMDLINE_LINUX=~/x\n", "built from shell expansion"),
    ('if [ -e /x ]; then\n  GRUB_CMDLINE_LINUX="a"\nfi\n', "inside a compound command"),
    ('f() { GRUB_CMDLINE_LINUX="a"; }\n', "inside a compound command"),
    ('GRUB_CMDLINE_LINUX="a" true\n', "only the environment"),
])
def test_refuses(text, message):
    with pytest.raises(GrubParseError, match=message):
        GrubDefaults(text).with_value("GRUB_CMDLINE_LINUX", "intel_iommu=on")


def test_refusal_names_file_and_line():
    with pytest.raises(GrubParseError, match=r"grub_file: /etc/default/grub line 2: GRUB_CMDLINE_LINUX is built"):
        GrubDefaults('# c\nGRUB_CMDLINE_LINUX="$X"\n').value("GRUB_CMDLINE_LINUX")


def test_other_variables_may_use_expansion():
    text = 'GRUB_CMDLINE_LINUX="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX splash"\n'
    after = edit(text, ka.iommu_ops("intel"))[0]
    assert after == 'GRUB_CMDLINE_LINUX="quiet intel_iommu=on iommu=pt"\n' + text.splitlines(True)[1]
    values = sh_source(after, ["GRUB_CMDLINE_LINUX_DEFAULT"])
    assert values["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet intel_iommu=on iommu=pt splash"


DEFAULT = "GRUB_CMDLINE_LINUX_DEFAULT"


@pytest.mark.parametrize("text, value, unknown", [
    # the self-append of a verity drop-in and of an audit drop-in (a line of their own after the assignment)
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT} ro"\n',
     "quiet splash ro", None),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT intel_iommu=off"\n',
     "quiet intel_iommu=off", None),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT+=" audit=1"\n', "quiet audit=1", None),
    ('GRUB_CMDLINE_LINUX="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX splash"\n', "  splash", None),  # the edited one
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=off `true`"\n', "quiet intel_iommu=off \x00", 1),
    ('GRUB_CMDLINE_LINUX_DEFAULT="a$(x)b"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', "quiet", None),  # overwritten: read
    ('if true; then\n  GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nfi\n', "quiet", 2),
])
def test_sourced_value(text, value, unknown):
    """The value sh leaves, self-references read; a line whose value is not known is named."""
    sourced = sourced_value([("/etc/default/grub", GrubDefaults(text))], DEFAULT, ignored=["GRUB_CMDLINE_LINUX"])
    assert sourced.value == value
    assert (sourced.unknown or (None, None))[1] == unknown
    if unknown is None and "$GRUB_CMDLINE_LINUX " not in text and "+=" not in text:  # dash has no +=: bash's reading
        assert sh_source(text, [DEFAULT])[DEFAULT] == value


# ---------------------------------------------------------------------------- quoting styles
@pytest.mark.parametrize("text, after", [
    ('GRUB_CMDLINE_LINUX="ro"\n', 'GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"\n'),
    ("GRUB_CMDLINE_LINUX='ro'\n", "GRUB_CMDLINE_LINUX='ro intel_iommu=on iommu=pt'\n"),
    ("GRUB_CMDLINE_LINUX=ro\n", 'GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"\n'),
    ("GRUB_CMDLINE_LINUX=\n", 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt"\n'),
    ('GRUB_CMDLINE_LINUX="ro"  # keep me\n', 'GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"  # keep me\n'),
    ('export GRUB_CMDLINE_LINUX="ro"\n', 'export GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"\n'),
    ('GRUB_CMDLINE_LINUX="ro"', 'GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"'),  # no trailing newline: still none
    ('A=1; GRUB_CMDLINE_LINUX="ro"; B=2\n', 'A=1; GRUB_CMDLINE_LINUX="ro intel_iommu=on iommu=pt"; B=2\n'),
    ('GRUB_CMDLINE_LINUX="ro \\\n quiet"\n', 'GRUB_CMDLINE_LINUX="ro quiet intel_iommu=on iommu=pt"\n'),
    ('GRUB_CMDLINE_LINUX="ro"\'  x\'\n', 'GRUB_CMDLINE_LINUX="ro x intel_iommu=on iommu=pt"\n'),
    ('GRUB_TIMEOUT=5', 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt"\n'),
    ('', 'GRUB_CMDLINE_LINUX="intel_iommu=on iommu=pt"\n'),
])
def test_quoting_kept(text, after):
    new, wanted = edit(text, ka.iommu_ops("intel"))
    assert new == after
    assert split_cmdline(sh_source(new, ["GRUB_CMDLINE_LINUX"])["GRUB_CMDLINE_LINUX"]) == wanted


def test_existing_quoted_arg_survives():
    text = 'GRUB_CMDLINE_LINUX="acpi_osi=\\"!Windows 2020\\" ro"\n'
    grub = GrubDefaults(text)
    assert grub.value("GRUB_CMDLINE_LINUX") == 'acpi_osi="!Windows 2020" ro'
    new, wanted = edit(text, ka.iommu_ops("intel"))
    assert wanted[0] == 'acpi_osi="!Windows 2020"'
    assert split_cmdline(sh_source(new, ["GRUB_CMDLINE_LINUX"])["GRUB_CMDLINE_LINUX"]) == wanted


# ---------------------------------------------------------------------------- generated files
SAFE = "abcdefghijklmnopqrstuvwxyz0123456789_.,:/=-"
OTHER_NAMES = st.sampled_from(["GRUB_DEFAULT", "GRUB_TIMEOUT", "GRUB_TERMINAL", "GRUB_CMDLINE_LINUX_DEFAULT",
                               "GRUB_GFXMODE", "GRUB_DISABLE_RECOVERY", "X_1"])
PLAIN = st.text(SAFE, min_size=1, max_size=12)


@st.composite
def double_quoted(draw):
    parts = draw(st.lists(st.one_of(st.text(SAFE + " #';|&<>()", min_size=1, max_size=8),
                                    st.sampled_from(['\\"', "\\$", "\\\\", "\\`", "$HOME", "${X:-y}", "$(echo a)"])),
                          max_size=4))
    return '"%s"' % "".join(parts)


@st.composite
def single_quoted(draw):
    return "'%s'" % draw(st.text(SAFE + ' "$`\\#;', max_size=12))


OTHER_VALUE = st.one_of(PLAIN, double_quoted(), single_quoted(), st.just(""),
                        st.just("`echo hi`"), st.just("$(echo 'a b')"))
ARGS = st.lists(st.sampled_from(["ro", "quiet", "splash", "intel_iommu=off", "iommu=pt", "console=ttyS0,115200n8",
                                 "pci-stub.ids=10de:20b5", "hugepagesz=2M", "hugepages=64", "rd.lvm.lv=cs/root",
                                 "crashkernel=1G-4G:192M,4G-64G:256M"]), max_size=6)


@st.composite
def grub_file(draw):
    lines = []
    for _line in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["comment", "blank", "assign", "commented_target"]))
        if kind == "comment":
            lines.append("#" + draw(st.text(SAFE + " \"'$`\\", max_size=20)))
        elif kind == "blank":
            lines.append(draw(st.sampled_from(["", "  ", "\t"])))
        elif kind == "commented_target":
            lines.append('#GRUB_CMDLINE_LINUX="' + " ".join(draw(ARGS)) + '"')
        else:
            lines.append("%s=%s" % (draw(OTHER_NAMES), draw(OTHER_VALUE)))
    has_target = draw(st.booleans())
    args = draw(ARGS) if has_target else []
    if has_target:
        style = draw(st.sampled_from(["double", "single", "plain", "mixed"]))
        joined = " ".join(args)
        if style == "double":
            value = '"%s"' % joined
        elif style == "single":
            value = "'%s'" % joined
        elif style == "plain" and len(args) <= 1:
            value = joined
        else:
            value = '"%s"\' \'' % joined if args else "''"
        line = draw(st.sampled_from(["", "export "])) + "GRUB_CMDLINE_LINUX=" + value
        line += draw(st.sampled_from(["", "  # managed", ";"]))
        lines.insert(draw(st.integers(0, len(lines))), line)
    text = "\n".join(lines)
    if draw(st.booleans()):
        text += "\n"
    return text, has_target, args


OPS = st.builds(
    lambda vendor, ids, extra: ka.iommu_ops(vendor) + ka.pre_bind_ops(ids, "pci-stub") + ka.args_ops(extra),
    st.sampled_from(["intel", "amd"]),
    st.lists(st.sampled_from(["10de:20b5", "1234:11e8"]), max_size=2),
    st.sampled_from([[], [{"name": "quiet", "state": "absent"}],
                     [{"name": "hugepagesz", "value": "1G"}, {"name": "hugepages", "value": "0:2,1:2"}]]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(generated=grub_file(), ops=OPS)
def test_generated_files(generated, ops):
    text, has_target, args = generated
    grub = GrubDefaults(text)
    assignment = grub.find("GRUB_CMDLINE_LINUX")
    assert (assignment is not None) == has_target
    assert split_cmdline(grub.value("GRUB_CMDLINE_LINUX") or "") == args
    after, wanted = edit(text, ops)
    # Only the value's bytes change (or one line is appended).
    if has_target:
        assert after.startswith(text[:assignment.value_start])
        assert after.endswith(text[assignment.value_end:])
    else:
        assert after.startswith(text) and after.count("\n") - text.count("\n") in (1, 2)
    # Idempotent: a second edit of the result changes nothing.
    again, wanted_again = edit(after, ops)
    assert again == after and wanted_again == wanted
    # The real /bin/sh gives the intended args and the same value for every other variable.
    names = sorted({a.name for a in grub.assignments} - {"GRUB_CMDLINE_LINUX"})
    before_values = sh_source(text, names)
    after_values = sh_source(after, names + ["GRUB_CMDLINE_LINUX"])
    assert split_cmdline(after_values.pop("GRUB_CMDLINE_LINUX")) == wanted
    assert after_values == before_values


def sh_reads(text, name):
    """(sourced without error, the value or UNSET) as the real /bin/sh reads ``text``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "grub")
        with open(path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        done = subprocess.run(["/bin/sh", "-c", '. "$1" 2>/dev/null; printf %%s "${%s-%s}"' % (name, UNSET), "sh", path],
                              capture_output=True, timeout=30, check=False)
    return done.returncode == 0, done.stdout.decode("utf-8")


@pytest.mark.parametrize("text, message", [
    ('GRUB_CMDLINE_LINUX="quiet" \r\n', "a blank before the carriage return"),
    ('GRUB_DEFAULT=0\r\nGRUB_CMDLINE_LINUX="quiet"\t\r\n', "a blank before the carriage return"),
    ('export GRUB_CMDLINE_LINUX="quiet"  \r\n', "a blank before the carriage return"),
    ("\ufeff# Uncomment to disable (for the serial console)\nGRUB_CMDLINE_LINUX=\"quiet\"\n", "byte order mark"),
    ("\ufeffGRUB_CMDLINE_LINUX=\"quiet\"\n", "byte order mark"),
    ('fi\nGRUB_CMDLINE_LINUX="quiet"\n', "'fi' closes nothing"),
    ('GRUB_CMDLINE_LINUX="quiet"\n)\n', "')' closes nothing"),
])
def test_what_sh_does_not_read_as_written_is_refused(text, message):
    """sh gives no such value (the \\r is a command, the mark is part of a word, a syntax error
    stops it): the module refuses instead of reporting a command line grub-mkconfig never gets."""
    ok, value = sh_reads(text, "GRUB_CMDLINE_LINUX")
    assert not ok or value != "quiet", (ok, value)
    with pytest.raises(GrubParseError, match=re.escape(message)):
        GrubDefaults(text).value("GRUB_CMDLINE_LINUX")


@pytest.mark.parametrize("ending", ["\r\r\n", "\r\r\r\n"])
def test_cr_cr_lf_lines_keep_every_carriage_return(ending):
    text = 'GRUB_DEFAULT=0' + ending + 'GRUB_CMDLINE_LINUX="quiet"' + ending
    grub = GrubDefaults(text)
    assert grub.value("GRUB_CMDLINE_LINUX") == "quiet"
    after = grub.with_value("GRUB_CMDLINE_LINUX", "quiet iommu=pt")
    assert after == 'GRUB_DEFAULT=0' + ending + 'GRUB_CMDLINE_LINUX="quiet iommu=pt"' + ending
    assert sh_reads(after, "GRUB_CMDLINE_LINUX") == (True, "quiet iommu=pt" + ending.replace("\n", ""))
