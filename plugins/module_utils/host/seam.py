# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one seam between the collection and the machine it changes.

A :class:`Host` bundles what a module may touch: the filesystem under ``root`` (read through
:class:`Sysfs`, and the files a module edits read through :meth:`Host.read_text`, checked with
:meth:`Host.file_target` and edited through ``files`` at the paths :meth:`Host.path` gives, which
never lead outside the root), the kernel's sysfs attributes (written through
``kernel``), and programs
(run through ``commands``: argument lists, ``LC_ALL=C``, return codes checked). The runner
builds one per module run from the module's ``root`` option; tests build one over a tree in
a temporary directory with a fake kernel and recorded commands, and nothing else is patched.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import (
    InputError, StateError, atomic_write, copy_model, file_target, read_text)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.sysfs import Sysfs

__metaclass__ = type

C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


class CommandError(StateError):
    """A program exited non-zero where success was needed."""

    def __init__(self, argv, rc, stdout, stderr):
        self.argv, self.rc, self.stdout, self.stderr = list(argv), rc, stdout or "", stderr or ""
        detail = (self.stderr or self.stdout).strip()
        super().__init__("command failed (rc=%d): %s%s" % (rc, " ".join(self.argv), ": " + detail if detail else ""))
        self.details = {"rc": rc, "cmd": self.argv, "stdout": self.stdout, "stderr": self.stderr}


def program_path(host, path, option, program, where):
    """The program a module runs: ``path``, its ``option`` (an executable file on the machine, run by the
    host's command runner, so not looked up under root), else ``program`` on the host's PATH; ``where``
    says how to get it. A bad path is an :class:`InputError`, a missing program a :class:`StateError`."""
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise InputError("%s: %s is not an executable file; point it at %s or leave it unset to use PATH; "
                             "nothing was changed" % (option, path, program))
        return path
    return host.commands.which(program, required=True, hint="%s, or set %s to its path" % (where, option))


class ModuleCommands:
    """Programs on the managed host, through the module's ``run_command``."""

    def __init__(self, module):
        self.module = module

    def which(self, name, required=False, hint=None):
        """Absolute path of ``name`` on PATH (then the sbin directories, as Ansible searches),
        or None; with ``required``, a missing program is a :class:`StateError` naming what to
        install."""
        path = self.module.get_bin_path(name)
        if path is None and required:
            raise StateError("%s was not found on PATH%s; nothing was changed" % (name, ": " + hint if hint else ""))
        return path

    def run(self, argv, check=True, data=None):
        """``(rc, stdout, stderr)`` of an argument list run with ``LC_ALL=C``; a non-zero
        exit raises :class:`CommandError` unless ``check`` is false."""
        rc, out, err = self.module.run_command(list(argv), environ_update=C_LOCALE, data=data,
                                               binary_data=data is not None)
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return rc, out, err


class KernelWriter:
    """Writes sysfs/procfs attributes under the root the reader uses. A refusal by the
    kernel (EBUSY, EINVAL, ...) reaches the caller as the OSError it is."""

    def __init__(self, fs):
        self.fs = fs

    def write(self, host_path, value):
        with open(self.fs.inside(host_path), "w", encoding="utf-8") as handle:
            handle.write(value)

    def mkdir(self, host_path):
        """configfs makes a kernel object by mkdir (rdma_cm/<dev>)."""
        os.mkdir(self.fs.inside(host_path, follow=False))

    def rmdir(self, host_path):
        os.rmdir(self.fs.inside(host_path, follow=False))


class FileWriter:
    """Edits of files under the root (real paths, as :meth:`Host.path` gives them): each
    file is written whole and atomically (:func:`common.atomic_write`), so a run stopped
    between two edits leaves every file either old or new."""

    def write(self, real_path, content, mode=None, backup=False):
        return atomic_write(real_path, content, mode=mode, backup=backup)

    def makedirs(self, real_path, mode=0o755):
        # exist_ok: a directory another call on the same host made meanwhile (two inventory
        # names of one machine write their files side by side) is the one wanted
        os.makedirs(real_path, mode, exist_ok=True)

    def remove(self, real_path):
        if os.path.lexists(real_path):
            os.unlink(real_path)

    def symlink(self, target, real_path):
        os.symlink(target, real_path)


class Host:
    """What one module run may read and change. ``root`` other than ``/`` is a captured or
    fake tree: reads and file edits go under it, and ``live`` is false so that steps that only
    make sense on the running machine (daemon reloads, service restarts) are skipped."""

    def __init__(self, root="/", commands=None, kernel=None, files=None, libvirt_open=None):
        root = os.path.abspath(root or "/")
        if not os.path.isdir(root):
            raise InputError("root %s is not a directory: give the host's / or a captured tree "
                             "(playbooks/files/capture_host.py writes one)" % root)
        self.root = root
        self.fs = Sysfs(root)
        self.kernel = kernel if kernel is not None else KernelWriter(self.fs)
        self.commands = commands
        self.files = files if files is not None else FileWriter()
        # uri -> a connection context (host/libvirt_connection.py's ``connection`` unless injected)
        self._libvirt_open = libvirt_open
        self._host_model = None
        # argv -> (rc, stdout, stderr) of the programs read through read_once in this call
        self._read_answers = {}
        # Boot-time files (host path -> text) a step of this call has planned to write: a later
        # step of the same call builds on them (boot_files.BootFiles), so that in check mode,
        # where nothing is written, each PF's plan keeps the PFs planned before it, as the real
        # run, which writes after each, does.
        self.planned_files = {}

    def topology(self, gpu_ids=(), nic_ids=(), fresh=False):
        """The host model (:class:`topology.TopologyReader`), read once per module run: every
        feature of one call (and every stage the gate checks) decides from the same read, which
        on an 8-GPU host is most of a call's time. ``fresh`` reads the host again: a call that
        changed what the model shows (VFs made, drivers bound) asks for it before deciding on.
        Each caller gets its own copy, classified by its ``gpu_ids``/``nic_ids``."""
        # imported here: a call that reads no host model (read_again.py's program, which makes a gate's reads
        # again) does not compile the model's reader
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.topology import TopologyReader  # pylint: disable=import-outside-toplevel
        reader = TopologyReader(self.root, gpu_ids=gpu_ids, nic_ids=nic_ids, fs=self.fs)
        if fresh or self._host_model is None:
            self._host_model = reader.read_unclassified()
        return reader.classified(copy_model(self._host_model))

    def read_once(self, argv, check=True):
        """``(rc, stdout, stderr)`` of a program that only reads the host, asked once per module
        run, as the host model is read once: the gate's ConnectX firmware read and the boot stage it
        checks share one ``mlxconfig -d PF -e q`` per PF (each reads the card's configuration). A
        step that changes what such a program shows (a firmware set, a reset) calls
        :meth:`forget_reads` before it reads again. A non-zero exit raises :class:`CommandError`
        unless ``check`` is false, as :meth:`ModuleCommands.run` does."""
        key = tuple(argv)
        if key not in self._read_answers:
            self._read_answers[key] = self.commands.run(list(argv), check=False)
        rc, out, err = self._read_answers[key]
        if check and rc != 0:
            raise CommandError(argv, rc, out, err)
        return rc, out, err

    def forget_reads(self):
        """What :meth:`read_once` answered so far no longer holds: the next read asks again."""
        self._read_answers.clear()

    def libvirt(self, uri):
        """A libvirt connection to ``uri``, closed when the ``with`` block ends: every libvirt
        call of a feature goes through here, as its files and commands do."""
        if self._libvirt_open is not None:
            return self._libvirt_open(uri)
        # libvirt-python is imported only by the calls that talk to libvirt
        from ansible_collections.gpuvirt.tenancy.plugins.module_utils.host.libvirt_connection import connection  # pylint: disable=import-outside-toplevel
        return connection(uri)

    @property
    def live(self):
        return self.root == os.sep

    def path(self, host_path, option=None, follow=True):
        """The real path of a host path (``/etc/default/grub``) under the root. Under a root
        other than ``/``, a path that resolves outside it (``..``, a symlink in the tree that
        leads out; with ``follow`` false, the last component is a link made or removed itself,
        not followed) is an :class:`InputError` naming ``option``: every file a module reads
        to edit, writes, links or removes is named through here, so no module writes outside
        its root."""
        return self.fs.inside(host_path, option=option, follow=follow)

    def read_text(self, host_path, option=None, shown=None, errors="strict", not_utf8="refuse"):
        """The text of a file a module edits (``/etc/default/grub``), exactly as it is, or None
        when it is missing or unreadable: :func:`vocabulary.common.read_text` at :meth:`path`
        (a path that leads outside the root is refused naming ``option``), the file named as
        ``shown`` (default: ``host_path``) in a refusal. Every read of such a file goes through
        here, as every read of sysfs goes through ``fs``."""
        return read_text(self.path(host_path, option), option=option, shown=shown or host_path, errors=errors,
                         not_utf8=not_utf8)

    def file_target(self, host_path, option, create_parent=False, shown=None):
        """The real path of a file a module is to write, refused before anything changes when it
        cannot be written (:func:`vocabulary.common.file_target`: a directory, a parent that is no
        directory)."""
        return file_target(self.path(host_path, option), option, shown or host_path, create_parent=create_parent)

    def is_file(self, host_path, option=None):
        """Whether ``host_path`` is a regular file (a link to one counts), under :meth:`path`."""
        return os.path.isfile(self.path(host_path, option))

    def is_link(self, host_path, option=None):
        """Whether ``host_path`` itself is a symbolic link (not followed)."""
        return os.path.islink(self.path(host_path, option, follow=False))

    def lexists(self, host_path, option=None):
        """Whether ``host_path`` exists, a dangling link included (the link itself, not followed)."""
        return os.path.lexists(self.path(host_path, option, follow=False))

    def resolved(self, host_path, option=None):
        """The real path a write to ``host_path`` lands on, every link on the way followed: two
        files a module edits are one when these are equal."""
        return os.path.realpath(self.path(host_path, option))

    def ip_addresses_json(self):
        """``ip -j addr show`` on the live machine, as JSON text with only each link's ``ifname``
        and each of its addresses' ``local``: which netdev holds an address (the SSH session's),
        without the lifetimes ip also prints, which count down between two reads. None off the
        live machine, without ip, or where this ip cannot print JSON (procfs answers then)."""
        ip = self.commands.which("ip") if self.live else None
        if not ip:
            return None
        rc, out, _err = self.commands.run([ip, "-j", "addr", "show"], check=False)
        try:
            links = json.loads(out) if rc == 0 else None
        except ValueError:
            links = None
        if not isinstance(links, list):
            return None
        return json.dumps([{"ifname": link.get("ifname"),
                            "addr_info": [{"local": info.get("local")} for info in link.get("addr_info") or []
                                          if isinstance(info, dict)]}
                           for link in links if isinstance(link, dict)])

    def bind(self, module):
        """Give the host the module's command runner unless one was injected."""
        if self.commands is None:
            self.commands = ModuleCommands(module)
        return self
