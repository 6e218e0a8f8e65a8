# -*- coding: utf-8 -*-
"""Atomic writes (mode kept, backup, no half file), lenient reads, and copies of the host model."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary import common
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import atomic_write, copy_model, read_text


def test_new_file_gets_0644(tmp_path):
    path = str(tmp_path / "unit.service")
    assert atomic_write(path, "[Unit]\n") is None
    assert read_text(path) == "[Unit]\n" and os.stat(path).st_mode & 0o7777 == 0o644


def test_mode_kept_and_backup(tmp_path):
    path = tmp_path / "grub"
    path.write_text("old\n")
    os.chmod(path, 0o600)
    backup = atomic_write(str(path), "new\n", backup=True)
    assert read_text(str(path)) == "new\n" and os.stat(path).st_mode & 0o7777 == 0o600
    assert backup.startswith(str(path) + ".") and backup.endswith("~") and read_text(backup) == "old\n"


def test_backups_in_one_second_keep_each_version(tmp_path, monkeypatch):
    """Three writes within one second (the clock held still): three backups, the first one the
    original, none overwritten."""
    monkeypatch.setattr(common.time, "strftime", lambda fmt, *when: "2026-12-03@17:30:00")
    path = tmp_path / "grub"
    path.write_text("original\n")
    backups = [atomic_write(str(path), "edit %d\n" % n, backup=True) for n in range(3)]
    assert backups == [str(path) + ".2026-12-03@17:30:00~", str(path) + ".2026-12-03@17:30:00.1~",
                       str(path) + ".2026-12-03@17:30:00.2~"]
    assert [read_text(b) for b in backups] == ["original\n", "edit 0\n", "edit 1\n"]
    assert read_text(str(path)) == "edit 2\n"


def test_failed_write_leaves_the_file_and_no_temporary(tmp_path):
    path = tmp_path / "grub"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        atomic_write(str(path), None)
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["grub"]


def test_read_text_default(tmp_path):
    assert read_text(str(tmp_path / "nowhere")) is None and read_text(str(tmp_path / "nowhere"), "") == ""


MODEL = {"pci_devices": {"0000:15:00.0": {"driver": "nvidia", "numa_node": 1, "bars": [[0, 16777216]], "vfs": []}},
         "cpus": {"online": "0-255", "siblings": {"0": [0, 128]}}, "iommu": {"enabled": False, "groups": {}},
         "pair": (1, 2), "ids": {"10de:20b0"}, "ratio": 0.5, "none": None}


def test_copy_model_is_equal_and_shares_nothing():
    copied = copy_model(MODEL)
    assert copied == MODEL and list(copied) == list(MODEL)
    copied["pci_devices"]["0000:15:00.0"]["vfs"].append("0000:15:00.1")
    copied["cpus"]["siblings"]["0"][1] = 129
    copied["iommu"]["groups"]["3"] = ["0000:15:00.0"]
    assert MODEL["pci_devices"]["0000:15:00.0"]["vfs"] == [] and MODEL["cpus"]["siblings"]["0"] == [0, 128]
    assert MODEL["iommu"]["groups"] == {}
    # types kept: a tuple stays a tuple, a set a set
    assert isinstance(copied["pair"], tuple) and isinstance(copied["ids"], set)


class Tagged(str):
    """Stands for a controller's tagged string (ansible-core 2.19), a str subclass marshal refuses."""


class Lazy(dict):
    """Stands for ansible-core's lazily templated dict (2.19 and later): its deep copy copies its
    templar, which ansible-core 2.21 warns about (a deprecation naming meta/runtime.yml)."""

    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied a lazily templated container")


class LazyList(list):
    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied a lazily templated container")


def test_copy_model_of_a_controllers_data_is_plain_and_never_deep_copies_a_container():
    data = Lazy(name=Tagged("tenant-a"), vfs=LazyList([Tagged("0000:19:00.2")]), pair=(1, Tagged("x")), count=3,
                on=True, ratio=0.5, none=None, ids={"10de:20b0"})
    copied = copy_model(data)
    assert copied == data and isinstance(copied["pair"], tuple)
    assert not isinstance(copied, Lazy) and not isinstance(copied["vfs"], LazyList)
    assert not any(isinstance(value, Tagged) for value in (copied["name"], copied["vfs"][0], copied["pair"][1]))
    assert copied["on"] is True and copied["count"] == 3 and copied["none"] is None and copied["ids"] == {"10de:20b0"}
    copied["vfs"].append("x")
    copied["ids"].add("x")
    assert len(data["vfs"]) == 1 and data["ids"] == {"10de:20b0"}


def _line_value_by_loop(text, allow_tab):
    """What check_line_value decides, read character by character (its refusing loop alone)."""
    for char in text:
        if char in common._CONTROL and not (allow_tab and char == "\t"):  # pylint: disable=protected-access
            return False
    return True


@pytest.mark.parametrize("allow_tab", [False, True])
def test_check_line_value_passes_exactly_what_its_loop_passes(allow_tab):
    # every control character the set names, a tab, characters around them, at each position
    specials = sorted(common._CONTROL) + ["\t", " ", "a", u"\u00e9", u"\u2027", u"\u202a", "\x80"]  # pylint: disable=protected-access
    texts = [""] + ["ab" + char + "cd" for char in specials] + list(specials) + ["x" * 40 + char for char in specials]
    texts += ["\t\t", "a\tb\nc", "plain text", u"caf\u00e9"]
    for text in texts:
        if _line_value_by_loop(text, allow_tab):
            assert common.check_line_value(text, "opt", allow_tab) == text
        else:
            with pytest.raises(common.InputError, match="^opt: .* holds the control character"):
                common.check_line_value(text, "opt", allow_tab)
