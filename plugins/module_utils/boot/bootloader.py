# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An edit of the kernel args in one variable of the GRUB defaults file, and the commands
that regenerate the boot menu from it (``update-grub``, ``grub2-mkconfig``, ``grubby``).

:class:`GrubCmdlineEdit` plans the edit from :mod:`kernel_args` operations (the text itself
is edited by the pure :mod:`grub_defaults`), compares the result with the running kernel's
``/proc/cmdline``, and applies it. All I/O goes through the injected host: files under its
root, programs through ``host.commands``. Shared by the iommu_grub and hugepages features.
"""

from __future__ import absolute_import, division, print_function

import os

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.cmdline import (
    grub_cut, grub_read, grub_words, join_cmdline, kernel_part, split_cmdline)
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.boot.grub_defaults import UNKNOWN, GrubDefaults, GrubParseError, sourced_value

__metaclass__ = type

CMDLINE_VARIABLES = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
DEFAULTS_FILE = "/etc/default/grub"
DEBIAN_LIKE = {"debian", "ubuntu"}
RHEL_LIKE = {"rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn"}
TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")


class _NoBootloaderTool(Exception):
    """No tool to regenerate the boot menu: an error only when the file changes."""


def read_os_release(fs):
    """``ID`` and ``ID_LIKE`` words of /etc/os-release (under the root), lower case."""
    words = set()
    for line in (fs.read("/etc/os-release") or fs.read("/usr/lib/os-release") or "").splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            words.update(value.strip().strip("\"'").lower().split())
    return words


def cfg_stale(text, after_args):
    """True when a generated grub.cfg has Linux entries lacking the wanted args (an earlier
    run wrote the file but the regeneration failed)."""
    # split as the kernel splits (quoted values with blanks are one arg, as in after_args), each word
    # as GRUB's lexer reads it (a single-quoted arg is the arg)
    lines = [[grub_read(word) for word in split_cmdline(line)]
             for line in (text or "").splitlines() if line.split()[:1] in (["linux"], ["linuxefi"])]
    if not lines:
        return False
    # Recovery entries leave out GRUB_CMDLINE_LINUX_DEFAULT: one full entry is enough.
    return not any(all(arg in line for arg in after_args) for line in lines)


def quoted_arg_refusal(fs, which):
    """Why this host's boot menu may not get an arg that GRUB must read in single quotes (a ``;`` in
    it), or None when it may. Debian-family hosts build it with grub-mkconfig, whose 10_linux copies
    GRUB_CMDLINE_LINUX into each ``linux`` line as it is, where GRUB's lexer takes the quotes off. On
    RHEL-family hosts grubby writes the args into the BLS entries' ``options`` lines (EL8: into
    ``kernelopts`` in grubenv, which the entries name as ``$kernelopts``); GRUB's blscfg
    (rhboot/grub2 grub-core/commands/blscfg.c) makes each entry a script whose ``linux`` command
    gets the options, so an unquoted ``;`` ends the command there too, and whether grubby and
    grub2-editenv carry GRUB's single quotes through is not proven: refused there.
    ``which``: the host's command lookup (``host.commands.which``)."""
    family = read_os_release(fs)
    if family & RHEL_LIKE:
        return ("this is a RHEL-family host (/etc/os-release ID %s): grubby writes kernel args into the BLS entries' "
                "options lines (EL8: kernelopts in grubenv), which GRUB's blscfg turns into a linux command where an "
                "unquoted ';' ends the command, and that grubby keeps GRUB's single quotes there is not proven, so an "
                "argument with ';' is not written there" % " ".join(sorted(family)))
    if family & DEBIAN_LIKE or which("update-grub") or which("grub-mkconfig"):
        return None
    return ("this host's boot menu is built by none of update-grub and grub-mkconfig (/etc/os-release ID %s), so "
            "whether an argument with ';' reaches the kernel whole is not known" % (" ".join(sorted(family)) or "unknown"))


# Their meaning depends on the args before them (a count is for the size named last): never
# taken as given by the other variable.
ORDERED_KEYS = ("hugepagesz", "hugepages")


def given_elsewhere(ops, current_args, wanted_args, other_args):
    """The args the edit would add that the other cmdline variable already gives with the same
    value, and leaves as they are under the same operations: the kernel reads both variables,
    so adding them again would only say them twice."""
    other_kept = kernel_args.apply_ops(ops, other_args)

    def of_key(args, key):
        return [(kernel_args.arg_key(a), kernel_args.arg_value(a)) for a in args if kernel_args.arg_key(a) == key]

    given = []
    for arg in wanted_args:
        key = kernel_args.arg_key(arg)
        if arg in current_args or key in ORDERED_KEYS:
            continue
        others = of_key(other_args, key)
        if (key, kernel_args.arg_value(arg)) in others and others == of_key(other_kept, key):
            given.append(arg)
    return given


# systemd's Boot Loader Interface (systemd.io/BOOT_LOADER_INTERFACE): the loader that started this boot
# names itself and its version in this EFI variable ("systemd-boot 252.30"; GRUB's bli module writes "GRUB 2.12")
LOADER_INFO = "/sys/firmware/efi/efivars/LoaderInfo-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"


def boot_loader_name(fs):
    """The boot loader that started this boot, as it names itself in the EFI variable LoaderInfo,
    or None (no EFI, or a loader that does not set it). efivarfs gives 4 bytes of attributes, then
    the value: a NUL-terminated UTF-16LE string."""
    raw = fs.read_bytes(LOADER_INFO)
    if not raw or len(raw) <= 4:
        return None
    return raw[4:].decode("utf-16-le", "replace").split("\0", 1)[0].strip() or None


def booted_by_systemd_boot(name):
    return bool(name) and name.split()[0].lower() == "systemd-boot"


BLS_ENTRIES = "/boot/loader/entries/*.conf"
GRUBENV = "/boot/grub2/grubenv"


def bls_options(entry_text, grubenv_text):
    """The kernel args of a BLS entry's ``options`` line; ``$kernelopts`` (EL8: the args are in
    grubenv) is read from grubenv, other GRUB variables (``$tuned_params``) are left out. None
    when the entry has no options line or names kernelopts that grubenv does not hold."""
    options = None
    for line in (entry_text or "").splitlines():
        words = line.split(None, 1)
        if words and words[0] == "options":
            options = words[1] if len(words) > 1 else ""
    if options is None:
        return None
    env = dict(line.split("=", 1) for line in (grubenv_text or "").splitlines() if "=" in line and not line.startswith("#"))
    args = []
    for arg in split_cmdline(options):
        if arg in ("$kernelopts", "${kernelopts}"):
            if "kernelopts" not in env:
                return None
            args += split_cmdline(env["kernelopts"])
        elif not arg.startswith("$"):
            args.append(arg)
    return args


def bls_pending(fs, ops):
    """(missing, unwanted): args the operations would add to / take from any BLS entry."""
    missing, unwanted = [], []
    grubenv = fs.read(GRUBENV)
    for path in fs.glob(BLS_ENTRIES):
        args = bls_options(fs.read(path), grubenv)
        if args is None:
            continue
        entry_missing, entry_unwanted = kernel_args.pending_changes(ops, kernel_part(args))
        missing += [a for a in entry_missing if a not in missing]
        unwanted += [a for a in entry_unwanted if a not in unwanted]
    return missing, unwanted


class GrubCmdlineEdit:
    """Plans an edit of the kernel args in one GRUB variable (:meth:`plan`), then applies it
    (:meth:`apply`). ``grub_file`` is a host path, read and written under the host's root."""

    def __init__(self, host, ops, grub_file=DEFAULTS_FILE, variable="GRUB_CMDLINE_LINUX", bootloader_update="auto"):
        self.host = host
        self.ops = list(ops)
        self.grub_file = grub_file
        self.real_path = host.path(os.path.abspath(grub_file), "grub_file")
        self.variable = variable
        self.bootloader_update = bootloader_update
        self.result = {}

    # ------------------------------------------------------------------ decide
    def plan(self):
        if self.variable not in CMDLINE_VARIABLES:
            raise InputError("variable: %r is not one of %s" % (self.variable, ", ".join(CMDLINE_VARIABLES)))
        check_line_value(self.grub_file, "grub_file")
        if not self.host.is_file(os.path.abspath(self.grub_file), "grub_file"):
            raise InputError("grub_file: %s does not exist or is not a file; give the path of the GRUB defaults file "
                             "(/etc/default/grub on Debian, Ubuntu and RHEL-family hosts)" % self.grub_file)
        before = self.host.read_text(os.path.abspath(self.grub_file), "grub_file", shown=self.grub_file)
        if before is None:
            raise InputError("grub_file: %s cannot be read (permissions?)" % self.grub_file)
        grub = GrubDefaults(before, self.grub_file)
        # the variable's words as the file gives them, and the args GRUB makes of them (a single-quoted
        # word is its arg): the operations and every comparison work on the args
        current_words = split_cmdline(grub.value(self.variable))
        current_args = [grub_read(word) for word in current_words]
        wanted_args = kernel_args.apply_ops(self.ops, current_args)
        # the drop-ins, read and parsed once for both checks
        dropins = self._dropins()
        other_args = self._check_other_variable(grub, dropins)
        self._check_dropins(dropins)
        elsewhere = given_elsewhere(self.ops, current_args, wanted_args, other_args)
        wanted_args = [a for a in wanted_args if a not in elsewhere]
        wanted_words = self._words(wanted_args, current_words)
        changed = wanted_words != current_words
        after = grub.with_value(self.variable, join_cmdline(wanted_words)) if changed else before
        if changed:
            # The written file must give back exactly the words that were meant, and GRUB the args.
            again = GrubDefaults(after, self.grub_file)
            words_again = split_cmdline(again.value(self.variable))
            if words_again != wanted_words or [grub_read(word) for word in words_again] != wanted_args:
                raise GrubParseError("grub_file: %s: the edited %s would not read back as %s; nothing was changed"
                                     % (self.grub_file, self.variable, join_cmdline(wanted_words)))
        running = self.host.fs.read("/proc/cmdline", "")
        missing, unwanted = kernel_args.pending_changes(self.ops, kernel_part(split_cmdline(running)))
        self._check_boots_from_grub(missing, unwanted)
        try:
            commands, stale = self._bootloader_commands(current_args, wanted_args, grub)
        except _NoBootloaderTool as exc:
            if changed:
                raise InputError(str(exc))
            commands, stale = [], False
        self.result = {
            "before": before,
            "after": after,
            "file_changed": changed,
            "cmdline": join_cmdline(wanted_words),
            "args": wanted_words,
            "running_cmdline": running,
            "args_missing": missing,
            "args_unwanted": unwanted,
            "args_in_other_variable": elsewhere,
            "reboot_required": bool(missing or unwanted),
            "bootloader_commands": commands if (changed or stale) else [],
        }
        self.result["changed"] = changed or bool(self.result["bootloader_commands"])
        return self.result

    def _words(self, wanted_args, current_words):
        """The variable's words for the wanted args (:func:`cmdline.grub_words`): an arg that GRUB would
        read otherwise goes in single quotes. A word that GRUB cuts (a ``;`` outside quotes) and that the
        edit keeps is refused: the kernel would get only its part before the ``;``."""
        for word in current_words:
            if grub_cut(word) and grub_read(word) in wanted_args:
                raise InputError("grub_file: %s: %s holds %s, whose ';' GRUB's script language reads as the end of the "
                                 "linux command (the kernel gets only %s, and GRUB runs the rest as a command of its own): "
                                 "put it in single quotes ('%s') or remove it, and run again; nothing was changed"
                                 % (self.grub_file, self.variable, word, grub_read(word), word.replace("'", "")))
        try:
            return grub_words(wanted_args, current_words)
        except ValueError as exc:
            raise InputError("grub_file: %s: %s: no quoting makes GRUB read it back as one argument; nothing was "
                             "changed" % (self.grub_file, exc))

    def _check_boots_from_grub(self, missing, unwanted):
        """A host that booted with systemd-boot reads its kernel args from its own entries, not from the
        GRUB file: args the running kernel still lacks (or carries) would not come with a reboot. One
        whose kernel already runs as asked passes (the args came another way)."""
        if self.bootloader_update != "auto" or not (missing or unwanted):
            return
        loader = boot_loader_name(self.host.fs)
        if not booted_by_systemd_boot(loader):
            return
        args = ["+" + a for a in missing] + ["-" + a for a in unwanted]
        raise InputError("bootloader_update: this host booted with %s (EFI variable LoaderInfo), which does not read %s, so "
                         "its kernel would not get %s at the next boot. Kernel args for systemd-boot are not built here: put them in "
                         "/etc/kernel/cmdline and run proxmox-boot-tool refresh (Proxmox VE), or in the options line of "
                         "its loader entries, and run again; or set bootloader_update: none to edit the GRUB file anyway. "
                         "Nothing was changed" % (loader, self.grub_file, " ".join(args)))

    def _check_other_variable(self, grub, dropins):
        """Args in the other cmdline variable that the kernel reads after ours would undo the edit.
        Its args as the file leaves them; those an expansion hides cannot be checked: refused."""
        other_name = [v for v in CMDLINE_VARIABLES if v != self.variable][0]
        # what it takes from the edited variable is what this edit wants
        files = [(self.grub_file, grub)]
        # grub-mkconfig sources the file, then each drop-in in order: a drop-in's value is the one the kernel gets
        for path, text, parsed in dropins:
            if not isinstance(parsed, GrubParseError):
                files.append((path, parsed))
            elif other_name in text:
                raise InputError("%s (the file sets %s, whose args the kernel reads with %s's: they cannot be "
                                 "checked)" % (parsed, other_name, self.variable))
        other = sourced_value(files, other_name, ignored=[self.variable])
        other_words = [w for w in split_cmdline(other.value) if UNKNOWN not in w]
        other_args = [grub_read(w) for w in other_words]
        kept = kernel_args.apply_ops(self.ops, other_args)
        conflicts = [w for w, a in zip(other_words, other_args) if a not in kept]
        if conflicts:
            places = []
            for arg in conflicts:
                where = other.where(arg)
                if not places or places[-1][0] != where:
                    places.append((where, []))
                places[-1][1].append(arg)
            said = "; ".join("%s sets %s in %s" % (where, " ".join(args), other_name) for where, args in places)
            raise InputError("grub_file: %s, against what is asked here; the kernel would get both. Remove them there, "
                             "or set variable: %s" % (said, other_name))
        if other.unknown:
            path, line, why = other.unknown
            raise InputError("grub_file: %s line %d: %s, so the args it gives the kernel cannot be checked against the "
                             "ones asked here; write it as a plain quoted string (or set variable: %s) and run again"
                             % (path, line, why, other_name))
        return other_args

    def _dropins(self):
        """(host path, text as it is, its GrubDefaults or the GrubParseError it raised) of each
        ``<grub_file>.d/*.cfg``, in the order the shell sources them."""
        dropins = []
        for path in self.host.fs.glob(os.path.abspath(self.grub_file) + ".d/*.cfg"):
            text = self.host.read_text(path, "grub_file", errors="replace")
            if text is None:
                continue  # not a readable file: sh's [ -e ] sources it and fails, as before this edit
            try:
                parsed = GrubDefaults(text, path)
            except GrubParseError as exc:
                parsed = exc
            dropins.append((path, text, parsed))
        return dropins

    def _check_dropins(self, dropins):
        """Ubuntu cloud images override variables in /etc/default/grub.d/*.cfg, read after the file."""
        for path, text, parsed in dropins:
            if isinstance(parsed, GrubParseError):
                names = [self.variable] if self.variable in text else []
            else:
                names = [a.name for a in parsed.assignments]
            if self.variable in names:
                raise InputError("grub_file: %s sets %s again after %s, so an edit there would not count; "
                                 "point grub_file at %s or remove the assignment there" % (
                                     path, self.variable, self.grub_file, path))

    def _first_existing(self, candidates):
        return next((path for path in candidates if self.host.fs.exists(path)), None)

    def _stale(self, cfg, after_args):
        return bool(cfg) and cfg_stale(self.host.fs.read(cfg), after_args)

    def _bootloader_commands(self, before_args, after_args, grub):
        """(commands to run after writing the file, whether the generated config is stale
        although the file already holds the wanted args)."""
        if self.bootloader_update == "none":
            return [], False
        if os.path.abspath(self.grub_file) != DEFAULTS_FILE:
            raise InputError("bootloader_update: auto regenerates the boot menu from /etc/default/grub, but grub_file "
                             "is %s; set bootloader_update: none to edit a copy" % self.grub_file)
        family = read_os_release(self.host.fs)
        bins = dict((name, self.host.commands.which(name)) for name in TOOLS)
        added = [a for a in after_args if a not in before_args]
        removed = [a for a in before_args if a not in after_args]
        bls = grub.safe_value("GRUB_ENABLE_BLSCFG") == "true"
        debian = bool(family & DEBIAN_LIKE) or (not family & RHEL_LIKE and bins["update-grub"])
        if debian:
            cfg = self._first_existing(["/boot/grub/grub.cfg"])
            if bins["update-grub"]:
                commands = [[bins["update-grub"]]]
            elif bins["grub-mkconfig"]:
                commands = [[bins["grub-mkconfig"], "-o", "/boot/grub/grub.cfg"]]
            else:
                raise _NoBootloaderTool("bootloader_update: auto found neither update-grub nor grub-mkconfig on this "
                                        "Debian-family host; install grub2-common or set bootloader_update: none")
            return commands, self._stale(cfg, after_args)
        if family & RHEL_LIKE or bins["grub2-mkconfig"] or bins["grubby"]:
            if bls and bins["grubby"]:
                # Kernel args live in the BLS entries: grubby edits them, the file keeps new kernels right.
                # What the entries still lack or carry is asked too: an earlier grubby run may have failed.
                missing, unwanted = bls_pending(self.host.fs, self.ops)
                added += [a for a in missing if a not in added]
                removed += [a for a in unwanted if a not in removed and a not in added]
                cut = [a for a in added if ";" in a]
                if cut:
                    raise InputError("grub_file: %s would go into the BLS entries' options lines through grubby, and "
                                     "GRUB's blscfg makes them a linux command where the ';' ends the command; add it "
                                     "there by hand in a form that reaches the kernel whole (check /proc/cmdline); "
                                     "nothing was changed" % " ".join(cut))
                command = [bins["grubby"], "--update-kernel=ALL"]
                if added:
                    command.append("--args=%s" % " ".join(added))
                if removed:
                    command.append("--remove-args=%s" % " ".join(removed))
                return ([command] if (added or removed) else []), bool(missing or unwanted)
            cfg = self._first_existing(["/boot/grub2/grub.cfg"] + self.host.fs.glob("/boot/efi/EFI/*/grub.cfg"))
            if bins["grub2-mkconfig"] and cfg:
                return [[bins["grub2-mkconfig"], "-o", cfg]], self._stale(cfg, after_args)
            raise _NoBootloaderTool("bootloader_update: auto found no grub2-mkconfig with a grub.cfg nor grubby on this "
                                    "RHEL-family host; set bootloader_update: none and regenerate the boot menu yourself")
        raise _NoBootloaderTool("bootloader_update: auto cannot tell how this host builds its boot menu (no update-grub, "
                                "grub2-mkconfig or grubby; /etc/os-release ID %s); set bootloader_update: none"
                                % (" ".join(sorted(family)) or "unknown"))

    # ------------------------------------------------------------------ act
    def apply(self, run, backup=False):
        """Write the file and regenerate the boot menu (the caller checks check mode); each
        step done is recorded on ``run``. Returns the backup path or None."""
        backup_file = None
        if self.result["file_changed"]:
            backup_file = self.host.files.write(self.real_path, self.result["after"], backup=backup)
            run.changed = True
        for command in self.result["bootloader_commands"]:
            self.host.commands.run(command)
            run.changed = True
        return backup_file
