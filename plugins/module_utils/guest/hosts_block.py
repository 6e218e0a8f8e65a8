# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A block of ``IP NAME...`` lines between two marker lines in a hosts file (``/etc/hosts``).

The text is the one ``ansible.builtin.blockinfile`` writes with the same marker (begin and end
markers ``# BEGIN ...`` / ``# END ...``, ``\\n`` line endings, a new block appended at the end,
an existing block replaced where it is), so a file that blockinfile wrote converges without a
change. Lines outside the block are kept byte for byte.
"""

from __future__ import absolute_import, division, print_function

import ipaddress
import re

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError, check_line_value

__metaclass__ = type

DEFAULT_MARKER = "# {mark} gpuvirt.tenancy guest_rdma"
MARKS = ("BEGIN", "END")
# A host name as hosts(5) takes it: dot-separated labels of letters, digits, hyphens (and the
# underscores many inventories use, which glibc resolves), none starting or ending with a hyphen.
NAME_LABEL_RE = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)\Z")
NAME_MAX = 253


def check_marker(marker, option="hosts_marker"):
    """The marker template: one line holding ``{mark}``, which becomes BEGIN and END."""
    text = check_line_value(marker, option)
    if "{mark}" not in text:
        raise InputError("%s: %r has no {mark}; the begin and end lines are told apart by it "
                         "(for example '# {mark} my block')" % (option, text))
    if not text.lstrip().startswith("#"):
        raise InputError("%s: %r does not start with '#'; a marker must be a comment line of the hosts file"
                         % (option, text))
    return text


def check_name(name, option):
    text = check_line_value(name, option).strip()
    labels = text.split(".")
    if not text or len(text) > NAME_MAX or not all(NAME_LABEL_RE.match(label) for label in labels):
        raise InputError("%s: %r is not a host name: use letters, digits, hyphens and underscores in "
                         "dot-separated labels of at most 63 characters, none starting or ending with a hyphen"
                         % (option, name))
    return text


def check_ip(value, option):
    text = check_line_value(value, option).strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise InputError("%s: %r is not an IPv4 or IPv6 address (such as 192.168.83.10)" % (option, value))


def block_lines(entries, option="hosts_entries"):
    """``[{"ip": ..., "names": [...]}]`` -> the block's lines ``"IP NAME NAME"``, in the given
    order. A name given twice is refused: the resolver answers with the first line only."""
    lines, owner = [], {}
    for number, entry in enumerate(entries or []):
        where = "%s[%d]" % (option, number)
        ip = check_ip(entry.get("ip"), where + ".ip")
        names = entry.get("names") or []
        if not names:
            raise InputError("%s.names: give at least one name for %s" % (where, ip))
        checked = [check_name(name, "%s.names" % where) for name in names]
        for name in checked:
            if name.lower() in owner:
                raise InputError("%s.names: %s is given twice (for %s and for %s); the resolver would only ever "
                                 "answer the first" % (where, name, owner[name.lower()], ip))
            owner[name.lower()] = ip
        lines.append("%s %s" % (ip, " ".join(checked)))
    return lines


def _marker_lines(old, marker):
    """Numbers of the last BEGIN and the last END marker line (None when missing)."""
    begin, end = (marker.replace("{mark}", mark) for mark in MARKS)
    first = last = None
    for number, line in enumerate(old):
        body = line.rstrip("\r\n")
        if body == begin:
            first = number
        if body == end:
            last = number
    return first, last


def block_found(text, marker=DEFAULT_MARKER):
    """The lines the marked block of ``text`` holds now, such that ``render_block`` with them
    gives ``text`` back: ``[]`` without a block, None for a block not in the form written here
    (CRLF endings, no lines), which any lines would rewrite. So a caller that compares wanted
    lines with these knows, without the file, whether writing them would change it."""
    old = (text or "").splitlines(True)
    first, last = _marker_lines(old, marker)
    if first is None or last is None:
        return []
    lines = [line.rstrip("\r\n") for line in old[min(first, last) + 1:max(first, last)]]
    return lines if render_block(text, lines, marker) == (text or "") else None


def render_block(text, lines, marker=DEFAULT_MARKER):
    """``text`` with the marked block holding ``lines`` (no block when ``lines`` is empty).

    As blockinfile does: the last BEGIN and the last END marker lines delimit the block, which is
    replaced where it is; without both, the block is appended at the end of the file (after a
    line ending added to an unterminated last line)."""
    begin, end = (marker.replace("{mark}", mark) for mark in MARKS)
    old = (text or "").splitlines(True)
    first, last = _marker_lines(old, marker)
    new = [begin + "\n"] + [line + "\n" for line in lines] + [end + "\n"] if lines else []
    if first is None or last is None:
        if not new:
            return text or ""
        at = len(old)
    else:
        at = min(first, last)
        del old[at:max(first, last) + 1]
    if new and at > 0 and not old[at - 1].endswith(("\n", "\r")):
        old[at - 1] += "\n"
    old[at:at] = new
    return "".join(old)
