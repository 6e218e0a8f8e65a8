# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``/etc/default/grub``: read one variable's value, write a new value into it, and change
no other byte of the file.

The file is a /bin/sh script that ``grub-mkconfig`` sources. :class:`GrubDefaults` scans it
with the shell's quoting rules (comments, ``'...'``, ``"..."`` with backslash escapes,
``$(...)``, ``${...}``, backquotes, line continuations) to find where each assignment's value
starts and ends. It refuses, with :class:`GrubParseError`, what it cannot edit safely:
unbalanced quotes, the variable set more than once, a value built from shell expansion, an
assignment inside ``if``/``case``/a loop/a function, or one that is only a command's
environment. The new value keeps the quoting style of the old one.

:class:`GrubCmdlineEdit` plans and applies an edit of the kernel arguments in a GRUB
variable from :mod:`kernel_args` operations, with the bootloader regeneration commands, and
compares the result with the running kernel's ``/proc/cmdline``.
"""

from __future__ import annotations

import glob
import os
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.common import InputError, atomic_write, read_text, run_command
from ansible_collections.gpuvirt.tenancy.plugins.module_utils import kernel_args
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.sysfs import Sysfs
from ansible_collections.gpuvirt.tenancy.plugins.module_utils.topology import TopologyReader

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CMDLINE_VARIABLES = ("GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT")
OPENERS = {"if", "case", "for", "while", "until", "{", "("}
CLOSERS = {"fi", "esac", "done", "}", ")"}
OPERATORS = ";&|()<>"
SAFE_UNQUOTED_RE = re.compile(r"^[A-Za-z0-9_.,:/+@%=^-]+$")


class GrubParseError(InputError):
    """The file cannot be read or edited safely; nothing was changed."""


class _NoBootloaderTool(Exception):
    """No tool to regenerate the boot menu: an error only when the file changes."""


class Assignment:
    """``NAME=value`` at the start of a simple command."""

    def __init__(self, name, line, value_start, value_end):
        self.name = name
        self.line = line
        self.value_start = value_start  # offset of the first byte after '='
        self.value_end = value_end      # offset just past the word
        self.value = ""                 # the value the shell assigns (None: needs expansion)
        self.styles = set()             # 'single', 'double', 'plain'
        self.expansions = []            # the expansion texts found in the value
        self.depth = 0                  # nesting inside compound commands
        self.env_only = False           # followed by a command word: only that command's environment
        self.exported = False


class _Word:
    def __init__(self, start):
        self.start = start
        self.end = start
        self.literal = []
        self.styles = set()
        self.expansions = []
        self.text_parts = []

    @property
    def value(self):
        return "".join(self.literal)


class GrubDefaults:
    """A parsed ``/etc/default/grub``. ``text`` is kept byte for byte."""

    def __init__(self, text, path="/etc/default/grub"):
        self.text = text
        self.path = path
        self.assignments = []
        self._scan()

    # ------------------------------------------------------------------ scanning
    def _error(self, offset, what):
        line = self.text.count("\n", 0, offset) + 1
        return GrubParseError("grub_file: %s line %d: %s; fix the file by hand (or use a copy) and run again"
                              % (self.path, line, what))

    def _skip_single(self, i):
        end = self.text.find("'", i + 1)
        if end < 0:
            raise self._error(i, "unbalanced single quote (no closing ')")
        return end + 1

    def _skip_backquote(self, i):
        j = i + 1
        while j < len(self.text):
            char = self.text[j]
            if char == "\\":
                j += 2
                continue
            if char == "`":
                return j + 1
            j += 1
        raise self._error(i, "unbalanced backquote (no closing `)")

    def _skip_double(self, i, word=None):
        """From an opening double quote; returns the offset past the closing one."""
        j = i + 1
        text = self.text
        while j < len(text):
            char = text[j]
            if char == '"':
                return j + 1
            if char == "\\":
                nxt = text[j + 1:j + 2]
                if not nxt:
                    break
                if nxt in '$`"\\':
                    if word is not None:
                        word.literal.append(nxt)
                elif nxt == "\n":
                    pass  # line continuation inside double quotes: removed by the shell
                elif word is not None:
                    word.literal.append("\\" + nxt)
                j += 2
                continue
            if char == "$":
                end = self._skip_dollar(j)
                if end > j + 1:
                    if word is not None:
                        word.expansions.append(text[j:end])
                    j = end
                    continue
                if word is not None:
                    word.literal.append(char)
                j += 1
                continue
            if char == "`":
                end = self._skip_backquote(j)
                if word is not None:
                    word.expansions.append(text[j:end])
                j = end
                continue
            if word is not None:
                word.literal.append(char)
            j += 1
        raise self._error(i, 'unbalanced double quote (no closing ")')

    def _skip_dollar(self, i):
        """From a ``$``; returns the offset past the expansion (i + 1 when it is a plain ``$``)."""
        text = self.text
        nxt = text[i + 1:i + 2]
        if nxt == "(":
            return self._skip_parens(i + 1)
        if nxt == "{":
            j = i + 2
            while j < len(text):
                char = text[j]
                if char == "}":
                    return j + 1
                if char == "\\":
                    j += 2
                    continue
                if char == "'":
                    j = self._skip_single(j)
                    continue
                if char == '"':
                    j = self._skip_double(j)
                    continue
                if char == "$":
                    j = max(self._skip_dollar(j), j + 1)
                    continue
                j += 1
            raise self._error(i, "unbalanced ${ (no closing })")
        match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]", text[i + 1:i + 200])
        if match:
            return i + 1 + match.end()
        return i + 1

    def _skip_parens(self, i):
        """From ``(`` of ``$(``/``$((``; returns the offset past the matching ``)``."""
        depth, j, text = 0, i, self.text
        while j < len(text):
            char = text[j]
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
            elif char == "\\":
                j += 2
                continue
            elif char == "'":
                j = self._skip_single(j)
                continue
            elif char == '"':
                j = self._skip_double(j)
                continue
            elif char == "`":
                j = self._skip_backquote(j)
                continue
            elif char == "#" and (j == 0 or text[j - 1] in " \t\n;"):
                end = text.find("\n", j)
                j = len(text) if end < 0 else end
                continue
            j += 1
        raise self._error(i, "unbalanced $( (no closing ))")

    def _read_word(self, i):
        """A shell word starting at ``i`` (not a blank, newline or operator)."""
        text = self.text
        word = _Word(i)
        at_start = True
        while i < len(text):
            char = text[i]
            if char in " \t\n" or char in OPERATORS:
                break
            if char == "'":
                end = self._skip_single(i)
                word.literal.append(text[i + 1:end - 1])
                word.styles.add("single")
                i = end
            elif char == '"':
                end = self._skip_double(i, word)
                word.styles.add("double")
                i = end
            elif char == "\\":
                nxt = text[i + 1:i + 2]
                if nxt == "\n":
                    i += 2  # line continuation
                    continue
                word.literal.append(nxt)
                word.styles.add("plain")
                i += 2
            elif char == "$":
                end = self._skip_dollar(i)
                if end > i + 1:
                    word.expansions.append(text[i:end])
                else:
                    word.literal.append(char)
                word.styles.add("plain")
                i = end
            elif char == "`":
                end = self._skip_backquote(i)
                word.expansions.append(text[i:end])
                word.styles.add("plain")
                i = end
            else:
                if char == "~" and (at_start or text[i - 1] in ":="):
                    word.expansions.append("~")  # tilde expansion in an assignment
                word.literal.append(char)
                word.styles.add("plain")
                i += 1
            at_start = False
        word.end = i
        return word

    def _scan(self):
        text = self.text
        i, depth, case_depth = 0, 0, 0
        command_start = True   # the next word starts a simple command
        in_assignments = False  # still in the leading NAME=value words of a command
        exporting = False
        pending = []            # assignments of the current command
        while i < len(text):
            char = text[i]
            if char in " \t":
                i += 1
                continue
            if char == "\\" and text[i + 1:i + 2] == "\n":
                i += 2
                continue
            if char == "#":
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
                continue
            if char == "\n" or char in ";&|":
                command_start, in_assignments, exporting, pending = True, False, False, []
                i += 1
                continue
            if char in "()":
                if case_depth and char == ")":
                    pass  # a case pattern
                elif char == "(":
                    depth += 1
                elif depth:
                    depth -= 1
                command_start, in_assignments, exporting, pending = True, False, False, []
                i += 1
                continue
            if char in "<>":
                i += 1
                continue
            word = self._read_word(i)
            i = word.end
            raw = text[word.start:word.end]
            if command_start:
                if raw in OPENERS:
                    depth += 1
                    if raw == "case":
                        case_depth += 1
                    continue
                if raw in CLOSERS:
                    depth = max(0, depth - 1)
                    if raw == "esac":
                        case_depth = max(0, case_depth - 1)
                    continue
                if raw in ("then", "else", "elif", "do", "!", "in"):
                    continue
                in_assignments = True
                if raw in ("export", "readonly"):
                    exporting = True
                    command_start = False
                    continue
            match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=", raw)
            if (in_assignments or exporting) and match:
                assignment = Assignment(match.group(1), text.count("\n", 0, word.start) + 1,
                                        word.start + match.end(), word.end)
                value_word = self._read_word(word.start + match.end()) if word.end > word.start + match.end() else None
                if value_word is not None:
                    assignment.value = value_word.value
                    assignment.styles = value_word.styles
                    assignment.expansions = value_word.expansions
                    # A backslash-newline inside the value is no byte of it.
                assignment.depth = depth
                assignment.exported = exporting
                self.assignments.append(assignment)
                pending.append(assignment)
                command_start = False
                continue
            if in_assignments and not exporting:
                for assignment in pending:
                    assignment.env_only = True
            command_start, in_assignments = False, False

    # ------------------------------------------------------------------ reading
    def find(self, name):
        """The one assignment of ``name``, None when it is not set; GrubParseError when it
        cannot be edited safely."""
        found = [a for a in self.assignments if a.name == name]
        if not found:
            return None
        if len(found) > 1:
            raise GrubParseError("grub_file: %s sets %s %d times (lines %s); the last one wins and an edit of any "
                                 "one of them is a guess: keep one assignment and run again"
                                 % (self.path, name, len(found), ", ".join(str(a.line) for a in found)))
        assignment = found[0]
        if assignment.expansions:
            raise GrubParseError("grub_file: %s line %d: %s is built from shell expansion (%s); its value is only known "
                                 "when the file runs: write it as a plain quoted string and run again"
                                 % (self.path, assignment.line, name, ", ".join(assignment.expansions)))
        if assignment.depth:
            raise GrubParseError("grub_file: %s line %d: %s is set inside a compound command (if/case/loop/function); "
                                 "whether it applies depends on the run: set it at the top level and run again"
                                 % (self.path, assignment.line, name))
        if assignment.env_only:
            raise GrubParseError("grub_file: %s line %d: %s= is only the environment of the command after it; "
                                 "write it as an assignment of its own and run again" % (self.path, assignment.line, name))
        return assignment

    def value(self, name):
        assignment = self.find(name)
        return None if assignment is None else assignment.value

    def safe_value(self, name):
        """The value, or None when it is not set or cannot be read safely."""
        try:
            return self.value(name)
        except GrubParseError:
            return None

    # ------------------------------------------------------------------ writing
    @staticmethod
    def quote(value, styles=frozenset(("double",))):
        """The value in the old quoting style where it can hold it, else double quotes."""
        if styles == {"single"} and "'" not in value:
            return "'%s'" % value
        if styles == {"plain"} and SAFE_UNQUOTED_RE.match(value):
            return value
        escaped = re.sub(r'([\\"$`])', r"\\\1", value)
        return '"%s"' % escaped

    def with_value(self, name, value):
        """The text with ``name`` set to ``value``; only the value's bytes change (or one line
        is appended when the variable is not set)."""
        if not NAME_RE.match(name):
            raise InputError("variable: %r is not a shell variable name" % (name,))
        assignment = self.find(name)
        if assignment is None:
            prefix = self.text
            if prefix and not prefix.endswith("\n"):
                prefix += "\n"
            return prefix + "%s=%s\n" % (name, self.quote(value))
        styles = assignment.styles or {"double"}
        if assignment.value == "" and styles == {"plain"}:
            styles = {"double"}
        return (self.text[:assignment.value_start] + self.quote(value, styles) + self.text[assignment.value_end:])


def read_os_release(fs):
    """``ID`` and ``ID_LIKE`` words of /etc/os-release (under the root), lower case."""
    words = set()
    for line in (fs.read("/etc/os-release") or fs.read("/usr/lib/os-release") or "").splitlines():
        key, _sep, value = line.partition("=")
        if key.strip() in ("ID", "ID_LIKE"):
            words.update(value.strip().strip("\"'").lower().split())
    return words


DEBIAN_LIKE = {"debian", "ubuntu"}
RHEL_LIKE = {"rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn"}


class GrubCmdlineEdit:
    """Plans an edit of the kernel args in one GRUB variable, then applies it.

    ``module`` is an AnsibleModule (binaries, commands, check mode); ``root`` the directory
    under which /proc, /etc/os-release and /boot are read.
    """

    def __init__(self, module, ops, grub_file="/etc/default/grub", variable="GRUB_CMDLINE_LINUX",
                 bootloader_update="auto", root="/"):
        self.module = module
        self.ops = list(ops)
        self.grub_file = grub_file
        self.variable = variable
        self.bootloader_update = bootloader_update
        self.fs = Sysfs(root)
        self.result = {}

    # ------------------------------------------------------------------ decide
    def plan(self):
        if self.variable not in CMDLINE_VARIABLES:
            raise InputError("variable: %r is not one of %s" % (self.variable, ", ".join(CMDLINE_VARIABLES)))
        if not os.path.isfile(self.grub_file):
            raise InputError("grub_file: %s does not exist or is not a file; give the path of the GRUB defaults file "
                             "(/etc/default/grub on Debian, Ubuntu and RHEL-family hosts)" % self.grub_file)
        before = read_text(self.grub_file)
        if before is None:
            raise InputError("grub_file: %s cannot be read (permissions?)" % self.grub_file)
        grub = GrubDefaults(before, self.grub_file)
        current = grub.value(self.variable)
        current_args = kernel_args.split_args(current or "")
        wanted_args = kernel_args.apply_ops(self.ops, current_args)
        self._check_other_variable(grub)
        self._check_dropins()
        changed = wanted_args != current_args
        after = grub.with_value(self.variable, kernel_args.join_args(wanted_args)) if changed else before
        if changed:
            # The written file must give back exactly the args that were meant.
            again = GrubDefaults(after, self.grub_file)
            if kernel_args.split_args(again.value(self.variable)) != wanted_args:
                raise GrubParseError("grub_file: %s: the edited %s would not read back as %s; nothing was changed"
                                     % (self.grub_file, self.variable, kernel_args.join_args(wanted_args)))
        running = self.fs.read("/proc/cmdline", "")
        running_args = kernel_args.kernel_part(kernel_args.split_args(running))
        missing, unwanted = kernel_args.pending_changes(self.ops, running_args)
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
            "args_before": current_args,
            "cmdline": kernel_args.join_args(wanted_args),
            "args": wanted_args,
            "running_cmdline": running,
            "args_missing": missing,
            "args_unwanted": unwanted,
            "reboot_required": bool(missing or unwanted),
            "bootloader_commands": commands if (changed or stale) else [],
            "bootloader_stale": stale,
        }
        self.result["changed"] = changed or bool(self.result["bootloader_commands"])
        return self.result

    def _check_other_variable(self, grub):
        """Args in the other cmdline variable that the kernel reads after ours would undo the edit."""
        other_name = [v for v in CMDLINE_VARIABLES if v != self.variable][0]
        try:
            other = grub.value(other_name)
        except GrubParseError:
            return
        other_args = kernel_args.split_args(other or "")
        kept = kernel_args.apply_ops(self.ops, other_args)
        conflicts = [a for a in other_args if a not in kept]
        if conflicts:
            raise InputError("grub_file: %s sets %s in %s, against what is asked here; the kernel would get both. "
                             "Remove them from %s, or set variable: %s" % (
                                 self.grub_file, " ".join(conflicts), other_name, other_name, other_name))

    def _check_dropins(self):
        """Ubuntu cloud images override variables in /etc/default/grub.d/*.cfg, read after the file."""
        for path in sorted(glob.glob(os.path.join(self.grub_file + ".d", "*.cfg"))):
            text = read_text(path) or ""
            try:
                names = [a.name for a in GrubDefaults(text, path).assignments]
            except GrubParseError:
                names = [self.variable] if self.variable in text else []
            if self.variable in names:
                raise InputError("grub_file: %s sets %s again after %s, so an edit there would not count; "
                                 "point grub_file at %s or remove the assignment there" % (
                                     path, self.variable, self.grub_file, path))

    def _grub_cfg(self, candidates):
        for path in candidates:
            if self.fs.exists(path):
                return path
        return None

    def _bootloader_commands(self, before_args, after_args, grub):
        """(commands to run after writing the file, whether the generated config is stale
        although the file already holds the wanted args)."""
        if self.bootloader_update == "none":
            return [], False
        if os.path.abspath(self.grub_file) != os.path.abspath(self.fs.path("/etc/default/grub")):
            raise InputError("bootloader_update: auto regenerates the boot menu from /etc/default/grub, but grub_file "
                             "is %s; set bootloader_update: none to edit a copy" % self.grub_file)
        family = read_os_release(self.fs)
        bins = {name: self.module.get_bin_path(name) for name in
                ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")}
        added = [a for a in after_args if a not in before_args]
        removed = [a for a in before_args if a not in after_args]
        bls = grub.safe_value("GRUB_ENABLE_BLSCFG") == "true"
        debian = bool(family & DEBIAN_LIKE) or (not family & RHEL_LIKE and bins["update-grub"])
        if debian:
            cfg = self._grub_cfg(["/boot/grub/grub.cfg"])
            if bins["update-grub"]:
                commands = [[bins["update-grub"]]]
            elif bins["grub-mkconfig"]:
                commands = [[bins["grub-mkconfig"], "-o", "/boot/grub/grub.cfg"]]
            else:
                raise _NoBootloaderTool("bootloader_update: auto found neither update-grub nor grub-mkconfig on this "
                                        "Debian-family host; install grub2-common or set bootloader_update: none")
            return commands, self._cfg_stale(cfg, after_args)
        if family & RHEL_LIKE or bins["grub2-mkconfig"] or bins["grubby"]:
            if bls and bins["grubby"]:
                # Kernel args live in the BLS entries: grubby edits them, the file keeps new kernels right.
                command = [bins["grubby"], "--update-kernel=ALL"]
                if added:
                    command.append("--args=%s" % " ".join(added))
                if removed:
                    command.append("--remove-args=%s" % " ".join(removed))
                return ([command] if (added or removed) else []), False
            cfg = self._grub_cfg(["/boot/grub2/grub.cfg"] + sorted(glob.glob(self.fs.path("/boot/efi/EFI/*/grub.cfg"))))
            if bins["grub2-mkconfig"] and cfg:
                if cfg.startswith(self.fs.root) and self.fs.root != "/":
                    cfg = "/" + os.path.relpath(cfg, self.fs.root)
                return [[bins["grub2-mkconfig"], "-o", cfg]], self._cfg_stale(cfg, after_args)
            raise _NoBootloaderTool("bootloader_update: auto found no grub2-mkconfig with a grub.cfg nor grubby on this "
                                    "RHEL-family host; set bootloader_update: none and regenerate the boot menu yourself")
        raise _NoBootloaderTool("bootloader_update: auto cannot tell how this host builds its boot menu (no update-grub, "
                                "grub2-mkconfig or grubby; /etc/os-release ID %s); set bootloader_update: none"
                                % (" ".join(sorted(family)) or "unknown"))

    def _cfg_stale(self, cfg, after_args):
        """True when the generated grub.cfg has Linux entries lacking the wanted args (an
        earlier run wrote the file but the regeneration failed)."""
        if not cfg:
            return False
        text = self.fs.read(cfg)
        if not text:
            return False
        lines = [line.split() for line in text.splitlines() if line.split()[:1] in (["linux"], ["linuxefi"])]
        if not lines:
            return False
        # Recovery entries leave out GRUB_CMDLINE_LINUX_DEFAULT: one full entry is enough.
        return not any(all(arg in line for arg in after_args) for line in lines)

    # ------------------------------------------------------------------ act
    def apply(self, backup=False):
        """Write the file and regenerate the boot menu (never in check mode). Returns the backup path."""
        backup_file = None
        if self.module.check_mode:
            return None
        if self.result["file_changed"]:
            backup_file = atomic_write(self.grub_file, self.result["after"], backup=backup)
        for command in self.result["bootloader_commands"]:
            run_command(self.module, command)
        return backup_file

    def diff(self):
        return {
            "before": self.result["before"],
            "after": self.result["after"],
            "before_header": self.grub_file,
            "after_header": self.grub_file,
        }


def detect_vendor(root="/"):
    """intel / amd from /proc/cpuinfo (through the host model's reader); when that names no
    vendor this module knows, the platform's IOMMU table (DMAR: Intel VT-d, IVRS: AMD-Vi);
    else the raw vendor_id or None."""
    vendor = TopologyReader(root).read_cpu_vendor()
    if vendor in ("intel", "amd"):
        return vendor
    fs = Sysfs(root)
    if fs.exists("/sys/firmware/acpi/tables/DMAR"):
        return "intel"
    if fs.exists("/sys/firmware/acpi/tables/IVRS"):
        return "amd"
    return vendor


def iommu_grub_ops(params):
    """The kernel_args operations the iommu_grub options ask for (InputError on bad input)."""
    vendor = params["vendor"]
    if vendor == "auto":
        detected = detect_vendor(params["root"])
        if detected not in ("intel", "amd"):
            raise InputError("vendor: auto could not tell Intel from AMD in /proc/cpuinfo (vendor_id %s); "
                             "set vendor: intel or vendor: amd" % (detected or "missing"))
        vendor = detected
    ops = kernel_args.iommu_ops(vendor, params["iommu"], params["passthrough"])
    ops += kernel_args.pre_bind_ops(params["pre_bind_ids"], params["pre_bind_driver"])
    ops += kernel_args.args_ops(params["args"])
    return vendor, ops


def run_iommu_grub(module):
    """Everything the iommu_grub module does: decide, then act unless in check mode."""
    params = module.params
    try:
        vendor, ops = iommu_grub_ops(params)
        edit = GrubCmdlineEdit(module, ops, grub_file=params["grub_file"], variable=params["variable"],
                               bootloader_update=params["bootloader_update"], root=params["root"])
        plan = edit.plan()
    except InputError as exc:
        module.fail_json(msg=str(exc))
    backup_file = edit.apply(backup=params["backup"])
    result = {
        "changed": plan["changed"],
        "vendor": vendor,
        "cmdline": plan["cmdline"],
        "args": plan["args"],
        "running_cmdline": plan["running_cmdline"],
        "reboot_required": plan["reboot_required"],
        "args_missing": plan["args_missing"],
        "args_unwanted": plan["args_unwanted"],
        "bootloader_commands": plan["bootloader_commands"],
        "backup_file": backup_file,
    }
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = edit.diff()
    module.exit_json(**result)
