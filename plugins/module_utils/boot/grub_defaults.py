# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``/etc/default/grub`` as text: read one variable's value, write a new value into it, and
change no other byte of the file. Pure: text in, text out; the GRUB module's I/O is in
:mod:`bootloader`.

The file is a /bin/sh script that ``grub-mkconfig`` sources. :class:`GrubDefaults` scans it
with the shell's quoting rules (comments, ``'...'``, ``"..."`` with backslash escapes,
``$(...)``, ``${...}``, backquotes, line continuations) to find where each assignment's value
starts and ends. ``NAME+=...`` after the assignment is part of the setting, as bash applies it:
the value read is the assignment's followed by every append, and an edit keeps the appends
where the wanted value still ends with them. A CRLF file keeps its carriage returns (the
``\r`` before a newline ends a word and is kept, not rewritten). It refuses, with
:class:`GrubParseError`, what it cannot edit safely: unbalanced quotes, the variable assigned
more than once (or appended to before it is assigned), a value built from shell expansion,
an assignment inside ``if``/``case``/a loop/a function, or one that is only a command's
environment. The new value keeps the quoting style of the old one.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value

__metaclass__ = type

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
ASSIGNMENT_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
OPENERS = {"if", "case", "for", "while", "until", "{", "("}
CLOSERS = {"fi", "esac", "done", "}", ")"}
OPERATORS = ";&|()<>"
SAFE_UNQUOTED_RE = re.compile(r"^[A-Za-z0-9_.,:/+@%=^-]+\Z")


class GrubParseError(InputError):
    """The file cannot be read or edited safely; nothing was changed."""


class Assignment:
    """``NAME=value`` (or ``NAME+=value``, ``append``) at the start of a simple command."""

    def __init__(self, name, line, value_start, value_end, append=False):
        self.name = name
        self.append = append
        self.line = line
        self.value_start = value_start  # offset of the first byte after '='
        self.value_end = value_end      # offset just past the word
        self.value = ""                 # the value the shell assigns (None: needs expansion)
        self.styles = set()             # 'single', 'double', 'plain'
        self.expansions = []            # the expansion texts found in the value
        self.marks = []                 # (offset in value, expansion text)
        self.depth = 0                  # nesting inside compound commands
        self.env_only = False           # followed by a command word: only that command's environment
        self.cr_word = False            # a blank before the line's carriage return: sh runs the \r as a command


class _Word:
    def __init__(self, start):
        self.start = start
        self.end = start
        self.literal = []
        self.styles = set()
        self.expansions = []
        self.marks = []  # (offset in the value, expansion text): where each expansion sits

    @property
    def value(self):
        return "".join(self.literal)

    def expand(self, text):
        self.expansions.append(text)
        self.marks.append((len(self.value), text))


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
            if char in "$`":
                # a backquote always opens a command substitution; a $ only when a name or bracket follows
                end = self._skip_dollar(j) if char == "$" else self._skip_backquote(j)
                if end > j + 1:
                    if word is not None:
                        word.expand(text[j:end])
                    j = end
                    continue
            if word is not None:
                word.literal.append(char)
            j += 1
        raise self._error(i, 'unbalanced double quote (no closing ")')

    def _skip_quoting(self, j):
        """The offset past a backslash escape or a quoted string at ``j``; None when neither starts there."""
        char = self.text[j]
        if char == "\\":
            return j + 2
        if char == "'":
            return self._skip_single(j)
        if char == '"':
            return self._skip_double(j)
        return None

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
                skipped = self._skip_quoting(j)
                if skipped is not None:
                    j = skipped
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
            skipped = self._skip_quoting(j)
            if skipped is not None:
                j = skipped
                continue
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return j + 1
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
            if char in " \t\n" or char in OPERATORS or _line_end_cr(text, i):
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
                    word.expand(text[i:end])
                else:
                    word.literal.append(char)
                word.styles.add("plain")
                i = end
            elif char == "`":
                end = self._skip_backquote(i)
                word.expand(text[i:end])
                word.styles.add("plain")
                i = end
            else:
                if char == "~" and (at_start or text[i - 1] in ":="):
                    word.expand("~")  # tilde expansion in an assignment
                word.literal.append(char)
                word.styles.add("plain")
                i += 1
            at_start = False
        word.end = i
        return word

    def _scan(self):
        text = self.text
        if text.startswith(u"\ufeff"):
            # sh has no notion of a byte order mark: it is part of the first word, so a first line that is a
            # comment becomes a command whose quotes and parentheses can stop sh there (a syntax error)
            raise self._error(0, "the file starts with a UTF-8 byte order mark, which /bin/sh reads as part of the "
                                 "first word (a first-line comment becomes a command): remove the mark "
                                 "(sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)")
        i, depth, case_depth = 0, 0, 0
        command_start = True   # the next word starts a simple command
        in_assignments = False  # still in the leading NAME=value words of a command
        exporting = False
        pending = []            # assignments of the current command
        while i < len(text):
            char = text[i]
            if char in " \t" or _line_end_cr(text, i):
                if char == "\r" and i and text[i - 1] in " \t":
                    # the \r is a word of its own for sh (it is no blank there): a command after the assignments
                    for assignment in pending:
                        assignment.cr_word = True
                while text[i] == "\r" and text[i + 1:i + 2] == "\r":
                    i += 1
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
                else:
                    raise self._error(i, "')' closes nothing: /bin/sh stops reading the file here with a syntax "
                                         "error, and grub-mkconfig fails")
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
                    if not depth:
                        raise self._error(word.start, "%r closes nothing: /bin/sh stops reading the file here with a "
                                                      "syntax error, and grub-mkconfig fails" % raw)
                    depth -= 1
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
            match = ASSIGNMENT_RE.match(raw)
            if (in_assignments or exporting) and match:
                assignment = Assignment(match.group(1), text.count("\n", 0, word.start) + 1,
                                        word.start + match.end(), word.end, append=bool(match.group(2)))
                value_word = self._read_word(word.start + match.end()) if word.end > word.start + match.end() else None
                if value_word is not None:
                    assignment.value = value_word.value
                    assignment.styles = value_word.styles
                    assignment.expansions = value_word.expansions
                    assignment.marks = value_word.marks
                    # A backslash-newline inside the value is no byte of it.
                assignment.depth = depth
                self.assignments.append(assignment)
                pending.append(assignment)
                command_start = False
                continue
            if in_assignments and not exporting:
                for assignment in pending:
                    assignment.env_only = True
            command_start, in_assignments = False, False

    # ------------------------------------------------------------------ reading
    def setting(self, name):
        """The assignment of ``name`` and the ``+=`` appends after it (a list, the assignment
        first; only appends when the file never assigns it), None when it is not set;
        GrubParseError when it cannot be edited safely."""
        found = [a for a in self.assignments if a.name == name]
        if not found:
            return None
        plain = [a for a in found if not a.append]
        if len(plain) > 1:
            raise GrubParseError("grub_file: %s sets %s %d times (lines %s); the last one wins and an edit of any "
                                 "one of them is a guess: keep one assignment and run again"
                                 % (self.path, name, len(plain), ", ".join(str(a.line) for a in plain)))
        if plain and found[0] is not plain[0]:
            raise GrubParseError("grub_file: %s appends to %s (line %d) before it sets it (line %d), which throws the "
                                 "append away: keep the assignment first and run again"
                                 % (self.path, name, found[0].line, plain[0].line))
        for assignment in found:
            if assignment.expansions:
                raise GrubParseError("grub_file: %s line %d: %s is built from shell expansion (%s); its value is only "
                                     "known when the file runs: write it as a plain quoted string and run again"
                                     % (self.path, assignment.line, name, ", ".join(assignment.expansions)))
            if assignment.depth:
                raise GrubParseError("grub_file: %s line %d: %s is set inside a compound command (if/case/loop/"
                                     "function); whether it applies depends on the run: set it at the top level and "
                                     "run again" % (self.path, assignment.line, name))
            if assignment.cr_word:
                raise GrubParseError("grub_file: %s line %d: a blank before the carriage return that ends the line: "
                                     "/bin/sh reads that \\r as a command, so %s is not set as written; remove the "
                                     "blank (or convert the file to LF) and run again" % (self.path, assignment.line, name))
            if assignment.env_only:
                raise GrubParseError("grub_file: %s line %d: %s= is only the environment of the command after it; "
                                     "write it as an assignment of its own and run again"
                                     % (self.path, assignment.line, name))
        return found

    def find(self, name):
        """The one assignment of ``name`` (the first part of its setting), None when it is not set."""
        parts = self.setting(name)
        return None if parts is None else parts[0]

    def value(self, name):
        """The value bash gives ``name`` after sourcing the file: the assignment and its appends."""
        parts = self.setting(name)
        return None if parts is None else "".join(part.value for part in parts)

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
        """The text with ``name`` set to ``value``: only the bytes of its setting change (or
        one line is appended when the variable is not set). With ``+=`` appends, the
        assignment takes what the appends do not already give; when the value does not end
        with them, it takes the whole value and the appends become empty."""
        if not NAME_RE.match(name):
            raise InputError("variable: %r is not a shell variable name" % (name,))
        check_line_value(value, name)
        parts = self.setting(name)
        if parts is None:
            prefix = self.text
            newline = "\r\n" if prefix.endswith("\r\n") else "\n"
            if prefix and not prefix.endswith("\n"):
                prefix += newline
            return prefix + "%s=%s%s" % (name, self.quote(value), newline)
        appended = "".join(part.value for part in parts[1:])
        if value.endswith(appended):
            values = [value[:len(value) - len(appended)]] + [part.value for part in parts[1:]]
        else:
            values = [value] + [""] * (len(parts) - 1)
        text = self.text
        for part, new in reversed(list(zip(parts, values))):
            if new == part.value:
                continue
            styles = part.styles or {"double"}
            if new == "" and styles == {"plain"}:
                styles = {"double"}
            text = text[:part.value_start] + self.quote(new, styles) + text[part.value_end:]
        return text


# Stands for an expansion whose value is unknown: a word holding it is no word that can be read.
UNKNOWN = u"\x00"


class SourcedValue:
    """A variable as the shell leaves it after sourcing files in order: ``value`` (None: never
    set; UNKNOWN where an expansion could not be read), ``parts`` (path, line, value) of the
    assignments it is made of, ``unknown`` (path, line, why) of the last one not fully read."""

    def __init__(self):
        self.value = None
        self.parts = []
        self.unknown = None

    def where(self, word):
        """``PATH line N`` of the last assignment whose own value holds ``word``."""
        for path, line, value in reversed(self.parts):
            if word in value.split():
                return "%s line %d" % (path, line)
        return self.parts[-1][0] if self.parts else "?"


def _references(names):
    return set("$" + name for name in names) | set("${%s}" % name for name in names)


def sourced_value(files, name, ignored=()):
    """``name`` as grub-mkconfig's shell leaves it after sourcing ``files`` ([(path, GrubDefaults)])
    in order. A self-reference (``"$NAME x"``, ``"${NAME} x"``) takes the value so far, one to
    an ``ignored`` variable nothing; any other expansion, an assignment inside a compound command
    or only a command's environment is recorded in ``unknown`` (its literal words are still read)."""
    result = SourcedValue()
    own_refs, ignored_refs = _references([name]), _references(ignored)
    for path, grub in files:
        for assignment in grub.assignments:
            if assignment.name != name:
                continue
            refers = assignment.append or any(text in own_refs for _offset, text in assignment.marks)
            pieces, start, why = [], 0, None
            for offset, text in assignment.marks:
                pieces.append(assignment.value[start:offset])
                if text in own_refs:
                    pieces.append(result.value or "")
                elif text in ignored_refs:
                    pieces.append(" ")
                else:
                    pieces.append(UNKNOWN)
                    why = "is built from shell expansion (%s)" % text
                start = offset
            pieces.append(assignment.value[start:])
            value = "".join(pieces)
            if assignment.depth:
                why = "is set inside a compound command (if/case/loop/function)"
            elif assignment.env_only or assignment.cr_word:
                why = "is set for the command after it only, as /bin/sh reads the line"
            if not refers:
                result.parts, result.unknown = [], None
            result.value = (result.value or "") + value if assignment.append else value
            result.parts.append((path, assignment.line, assignment.value))
            if why:
                result.unknown = (path, assignment.line, "%s %s" % (name, why))
    return result


def _line_end_cr(text, i):
    """A carriage return that ends a line (CRLF files; also the CRs of ``CR CR LF``): no byte of
    a word, kept as it is."""
    if text[i] != "\r":
        return False
    end = i
    while text[end:end + 1] == "\r":
        end += 1
    return text[end:end + 1] in ("\n", "")
