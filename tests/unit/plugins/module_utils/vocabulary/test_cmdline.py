# -*- coding: utf-8 -*-
"""The one kernel command-line split, over the lab's /proc/cmdline and the kernel's quoting."""

from __future__ import annotations

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import (
    grub_cut, grub_read, grub_word, grub_words, join_cmdline, kernel_part, split_cmdline)


@pytest.mark.parametrize("text,expected", [
    ("BOOT_IMAGE=/vmlinuz root=UUID=1 ro quiet", ["BOOT_IMAGE=/vmlinuz", "root=UUID=1", "ro", "quiet"]),
    ('a="x y"  b\n', ['a="x y"', "b"]),
    ("", []),
    (None, []),
])
def test_split_cmdline(text, expected):
    assert split_cmdline(text) == expected


def test_join_is_the_inverse_of_split():
    args = ["console=ttyS0,115200n8", 'dyndbg="file a.c +p"', "quiet"]
    assert split_cmdline(join_cmdline(args)) == args


def test_init_args_after_double_dash_are_not_kernel_args():
    assert kernel_part("ro quiet -- --init-flag intel_iommu=on".split()) == ["ro", "quiet"]
    assert kernel_part(["ro"]) == ["ro"]


# pci=config_acs= with a list of bridges (Documentation/admin-guide/kernel-parameters.txt): ';' between them
LIST = "pci=config_acs=1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0"


@pytest.mark.parametrize("word, arg, cut", [
    # GRUB's lexer (grub-core/script/yylex.l): a single-quoted string is part of a word, its quotes go
    ("'%s'" % LIST, LIST, False),
    ("pci=config_acs='1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0'", LIST, False),
    # an unquoted ';' is the token that ends the command: the linux command gets the part before it
    (LIST, "pci=config_acs=1xxxx0x@0000:07:00.0", True),
    ("intel_iommu=on", "intel_iommu=on", False),
    # the kernel's double quotes, GRUB's expansions and an unbalanced quote: as before, the word itself
    ('acpi_osi="Windows 2015"', 'acpi_osi="Windows 2015"', False),
    ("$vt_handoff", "$vt_handoff", False),
    ("a'b", "a'b", False),
])
def test_a_word_as_grub_reads_it(word, arg, cut):
    assert grub_read(word) == arg and grub_cut(word) is cut


def test_an_arg_that_grub_would_read_otherwise_goes_in_single_quotes_and_reads_back():
    assert grub_word("intel_iommu=on") == "intel_iommu=on"
    assert grub_word(LIST) == "'%s'" % LIST and grub_read(grub_word(LIST)) == LIST
    for bad in ("a;b'c", 'a;"b c"', "a;b c"):
        with pytest.raises(ValueError, match="holds a quote or a blank"):
            grub_word(bad)


def test_words_keep_the_spelling_there_and_quote_what_is_new():
    quoted = "'%s'" % LIST
    # kept: the quoted word and the unquoted args as they were, in the new order
    assert grub_words(["quiet", LIST, "iommu=pt"], ["quiet", quoted]) == ["quiet", quoted, "iommu=pt"]
    assert grub_words(["quiet", LIST], ["quiet", "pci=config_acs='1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0'"]) == [
        "quiet", "pci=config_acs='1xxxx0x@0000:07:00.0;1xxxx0x@0000:0b:00.0'"]
    # new: quoted; a word that GRUB cuts is never taken as the spelling of an arg
    assert grub_words([LIST], []) == [quoted]
    assert grub_words([LIST], [LIST]) == [quoted]
    assert grub_words([], [quoted]) == []
