# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files one ``nccl_env`` call edits (:class:`FileEdit`: a file's text before and after, written
whole or removed), and the NCCL topology file's edit (:func:`topo_edit`): written where
guest.nccl_topo makes it; where it can no longer be made, the file this module wrote (known by its
first line, :data:`guest.nccl_topo.MARK`) removed and ``NCCL_TOPO_FILE`` with it, a file it did not
write left as it is. Decides only; :meth:`FileEdit.apply` writes, not in check mode."""

from __future__ import absolute_import, division, print_function

import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.guest.nccl_topo import MARK, check_links, topology_file

__metaclass__ = type


class FileEdit:
    """One file's text before and after, under the host's root: ``real`` is its real path,
    ``resolved`` the real file a write lands on (links followed), ``shown`` its host path;
    ``remove`` true: the file is to go."""

    def __init__(self, host, shown, option, create_parent=False):
        self.shown = shown
        self.real = host.file_target(shown, option, create_parent=create_parent)
        self.resolved = host.resolved(shown, option)
        self.before = host.read_text(shown, option)
        self.after = self.before
        self.remove = False

    @property
    def differs(self):
        if self.remove:
            return self.before is not None
        # None after: a missing file that stays missing
        return self.after is not None and self.after != self.before

    def apply(self, host, run, backup):
        """Write the new text (or remove the file) when it differs, not in check mode; the backup's host path or None."""
        run.diff.add(self.shown, self.before, None if self.remove else self.after)
        if not self.differs:
            return None
        saved = None
        if not run.check_mode:
            if self.remove:
                host.files.remove(self.real)
            else:
                host.files.makedirs(os.path.dirname(self.real))
                saved = host.files.write(self.real, self.after, backup=backup)
        run.changed = True
        if saved is not None and host.root != os.sep:
            return "/" + os.path.relpath(saved, host.root)
        return saved


def written_here(text):
    """Whether ``text`` is a topology file this module wrote (its first line is MARK)."""
    return (text or "").split("\n", 1)[0] == MARK


def topo_edit(params, host, others, rdma_devices):
    """The NCCL topology file of ``topo_links`` -> (edit or None, the result's ``topology``: {path, written,
    removed, kept, gpus, nics, level, reason, from_guest}). ``others``: the other files of the call (the
    topology file is none of them). Where no file can be made honestly: the file this module wrote is
    removed (``removed``), another one kept and said (``kept``)."""
    if params["topo_links"] is None:
        return None, None
    text, details = topology_file(host.fs, rdma_devices, check_links(params["topo_links"]))
    details.update({"path": params["topo_file"], "written": text is not None, "removed": False, "kept": None})
    edit = FileEdit(host, params["topo_file"], "topo_file", create_parent=True)
    if edit.resolved in [other.resolved for other in others if other is not None]:
        raise InputError("topo_file: %s is the NCCL settings file or the hosts file; give the topology a file of its own "
                         "(the default /etc/nccl-topo.xml)" % params["topo_file"])
    if text is not None:
        edit.after = text
        return edit, details
    if edit.before is None:
        return None, details
    if written_here(edit.before):
        edit.remove = True
        details["removed"] = True
        return edit, details
    details["kept"] = ("%s is not a file this module wrote (its first line is not %s): left as it is, and NCCL_TOPO_FILE with it"
                       % (params["topo_file"], MARK))
    return None, details
