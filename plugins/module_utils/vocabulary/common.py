# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers shared by the modules: input errors, atomic writes, commands."""

from __future__ import absolute_import, division, print_function

import copy
import errno
import io
import marshal
import os
import posixpath
import shutil
import tempfile
import time

__metaclass__ = type


class InputError(ValueError):
    """A bad module input. The message names the input and the fix; nothing was changed."""


class StateError(RuntimeError):
    """The host is not in a state where the change can be made safely; nothing was changed."""


class labelled:  # pylint: disable=invalid-name
    """``with labelled("pfs[1] (0000:c1:00.0)"):`` prefixes an InputError raised inside with the
    label of the list entry it is about (its details kept); None labels nothing (a module's
    single entry)."""

    def __init__(self, label):
        self.label = label

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, _traceback):
        if self.label is not None and kind is not None and issubclass(kind, InputError):
            error = InputError("%s: %s" % (self.label, exc))
            error.details = getattr(exc, "details", None)
            raise error
        return False


# C0 control characters, DEL, and the Unicode line and paragraph separators: each can end a
# line for some reader of the files this collection writes (sh, GRUB, udev, systemd, NCCL).
_CONTROL = set(chr(code) for code in range(0x20)) | set((chr(0x7f), u"\x85", u"\u2028", u"\u2029"))


def check_line_value(value, option, allow_tab=False):
    """``value`` as text that stays on one line of a written file: refuses a newline, a
    carriage return or another control character (they would start a new line, a new
    setting or a new command in the file), naming ``option``. The one check every file
    writer of the collection runs on what it writes. Returns the text."""
    text = u"" if value is None else value if isinstance(value, str) else str(value)
    if _CONTROL.isdisjoint(text):
        # no character of the set: nothing to refuse, known in one pass in C
        return text
    for position, char in enumerate(text):
        if char in _CONTROL and not (allow_tab and char == "\t"):
            raise InputError("%s: %r holds the control character %r at position %d; a value written into a "
                             "file must stay on one line: remove newlines and control characters"
                             % (option, text, char, position))
    return text


def normalised_path(shown, option):
    """``shown`` (a path as the user gave it) when it has no '.', '..', '//' or trailing '/'
    component and no control character, else an :class:`InputError` giving the normalised one."""
    check_line_value(shown, option)
    normal = "/" + posixpath.normpath(shown).lstrip("/") if shown.startswith("/") else posixpath.normpath(shown)
    if shown != normal:
        # '.', '..' and '//' components: what they name depends on links on the way, and directories made for
        # them would not be the ones meant
        raise InputError("%s: %s is not a normalised path (no '.', '..', '//' or trailing '/'); give %s"
                         % (option, shown, normal))
    return shown


def file_target(real_path, option, shown=None, create_parent=False):
    """Refuse, before anything changes, a file path that cannot be written: one that names a
    directory, or whose parent is not a directory (missing, unless ``create_parent``: then
    the nearest existing ancestor must be a directory). ``shown`` is the path as the user
    gave it (under the root)."""
    shown = normalised_path(shown or real_path, option)
    if os.path.isdir(real_path) or os.path.isdir(os.path.realpath(real_path)):
        # the resolved path too: 'missing/..' names the directory above, which isdir() of the path as given misses
        raise InputError("%s: %s is a directory; give the path of a file in it" % (option, shown))
    parent = os.path.dirname(os.path.realpath(real_path))
    while create_parent and not os.path.lexists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if os.path.lexists(parent) and not os.path.isdir(parent):
        raise InputError("%s: %s cannot be written: %s is not a directory; remove that file or give another path"
                         % (option, shown, parent))
    if not os.path.isdir(parent):
        raise InputError("%s: the directory of %s does not exist; create it first or give another path"
                         % (option, shown))
    return real_path


def _new_backup_path(path):
    """``PATH.YYYY-MM-DD@HH:MM:SS~``, or ``PATH.YYYY-MM-DD@HH:MM:SS.N~`` when that name is taken: two
    writes in one second must not overwrite the first backup (the original). The name is claimed
    with O_EXCL, so a backup made at the same moment by another writer is not overwritten either."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S")
    count = 0
    while True:
        candidate = "%s.%s%s~" % (path, stamp, ".%d" % count if count else "")
        try:
            os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return candidate
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
        count += 1


def atomic_write(path, content, mode=None, backup=False):
    """Write ``content`` to ``path`` through a temporary file in the same directory and a
    rename, so a reader never sees half a file. The text is written as it is given (no
    newline translation: a CRLF file stays CRLF). A symlink is followed: its target is
    written (atomically, in the target's directory) and the link stays a link. Returns the
    backup path or None."""
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    backup_path = None
    if backup and os.path.exists(target):
        backup_path = _new_backup_path(path)
        shutil.copy2(target, backup_path)
    if mode is None:
        mode = os.stat(target).st_mode & 0o7777 if os.path.exists(target) else 0o644
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(target))
    try:
        with io.open(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return backup_path


def undecodable(exc):
    """Where a UnicodeDecodeError stopped: ``byte 0xff at offset 12``."""
    offset = int(exc.start)
    return "byte 0x%02x at offset %d" % (bytearray(exc.object)[offset], offset)


def read_text(path, default=None, option=None, shown=None, errors="strict", not_utf8="refuse"):
    """The text of a file exactly as it is (CRLF kept), ``default`` when it is missing or
    unreadable. A file that is not UTF-8 is an :class:`InputError` naming ``option`` (the option
    that names the file) and the file as ``shown`` (its host path), not a traceback: nothing edits
    a file it cannot read; unless ``errors="replace"`` (such bytes read as U+FFFD) or
    ``not_utf8="default"`` (``default`` for such a file)."""
    try:
        with io.open(path, "r", encoding="utf-8", errors=errors, newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        if not_utf8 == "default":
            return default
        raise InputError("%s: %s is not UTF-8 text (%s); convert it (iconv -t UTF-8) or fix it by hand, then run "
                         "again; nothing was changed" % (option or "file", shown or path, undecodable(exc)))
    except (OSError, IOError):
        return default


def copy_model(data):
    """A deep copy of JSON-shaped data (the host model, a plan): marshal's round trip copies
    dicts, lists and scalars in C, several times faster than ``copy.deepcopy``, which the gate's
    call paid once per stage on an 8-GPU host's model. What marshal refuses (a controller's data as
    ansible-core 2.19 and later hands it to a filter: lazily templated containers, tagged strings)
    is rebuilt of plain types (:func:`plain_copy`)."""
    try:
        return marshal.loads(marshal.dumps(data))
    except ValueError:
        return plain_copy(data)


def plain_copy(data):
    """``data`` rebuilt of Python's own types: dicts, lists, tuples, strings, numbers, None.
    ``copy.deepcopy`` of ansible-core's lazily templated containers copies their templar too,
    and ansible-core 2.21 warns about that copy in every play that calls such a filter (a
    deprecation a user cannot act on); values of other types take ``copy.deepcopy``."""
    if isinstance(data, dict):
        return dict((plain_copy(key), plain_copy(value)) for key, value in data.items())
    if isinstance(data, (list, tuple)):
        items = [plain_copy(value) for value in data]
        return tuple(items) if isinstance(data, tuple) else items
    for kind in (bool, int, float, str, bytes):  # bool before int: True is an int too
        if isinstance(data, kind):
            return kind(data)
    return copy.deepcopy(data)
