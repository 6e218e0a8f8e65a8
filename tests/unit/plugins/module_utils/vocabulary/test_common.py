# -*- coding: utf-8 -*-
"""Atomic writes (mode kept, backup, no half file) and lenient reads."""

from __future__ import annotations

import os

import pytest

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import atomic_write, read_text


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


def test_failed_write_leaves_the_file_and_no_temporary(tmp_path):
    path = tmp_path / "grub"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        atomic_write(str(path), None)
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["grub"]


def test_read_text_default(tmp_path):
    assert read_text(str(tmp_path / "nowhere")) is None and read_text(str(tmp_path / "nowhere"), "") == ""
