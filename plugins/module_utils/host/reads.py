# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A read-only call's reads of the host, recorded, and made again in a call of their own.

The preflight gate reads the host and decides from what it read; it writes nothing. Given the same
code, the same options and the same answers to the same reads, it returns the same result. So a
run of the gate can record each read it makes through the seam (:class:`Recorder`: the
:class:`~sysfs.Sysfs` reads, the :class:`~seam.Host` file reads, the programs it runs, the libvirt
calls) with a digest of each answer, and a later run can make exactly those reads again
(:func:`read_again`; on a host, the program of ``read_again.py``: the seam, without the stages' code) and compare the
digests. Where all are equal, the gate's result then is its result now; where one differs, the gate
runs again. Nothing is answered from a read that was not made again.

A recording is refused (``answerable`` false, with the reason) when the run read the machine past
the seam (:meth:`Recorder.guard` watches ``open`` and the ``os`` calls that read a path), when one
read answered two ways in one run, or when a libvirt call that is not a read was made. Reads whose
raw answer changes on every run although nothing the gate uses changed (``/proc/cpuinfo``'s clock,
``MemFree``, the routes' use counts, the ``/proc/PID/fd`` links of every process, the SSH session's
own port, the address lifetimes of ``ip addr``) are the seam's own composite reads
(``Sysfs.read_keys``, ``read_table``, ``fd_links``, ``environ_field``, ``Host.ip_addresses_json``)
that answer only the part that is used.
"""

from __future__ import absolute_import, division, print_function

import builtins
import contextlib
import functools
import hashlib
import json
import os
import sys

from ansible_collections.gpuvirt.tenancy.plugins.module_utils.vocabulary.common import InputError

__metaclass__ = type

# the reads each part of the seam offers: the methods a recording wraps and a read again may call
# (``inside`` and ``Host.path`` read only under a root other than /: the links on the way)
FS_READS = ("inside", "exists", "isdir", "read", "read_bytes", "read_error", "listdir", "glob", "readlink_name", "link_target",
            "realpath", "read_keys", "read_table", "fd_links", "environ_field")
HOST_READS = ("path", "read_text", "file_target", "is_file", "is_link", "lexists", "resolved", "ip_addresses_json")
COMMAND_READS = ("which", "run")
# each part of the seam a record names, with its reads
READS = {"fs": FS_READS, "host": HOST_READS, "commands": COMMAND_READS}
# libvirt's reads (host/libvirt_connection.py): on the connection, and on a domain or network it gives
LIBVIRT_READS = ("domain_names", "domain", "capabilities", "network", "keeps_qemu_arguments", "cpu_map_length",
                 "hypervisor_versions", "is_active", "is_persistent", "definition", "live_definition", "vcpu_pins",
                 "emulator_pin", "numa_nodeset", "vcpus", "scheduler", "block_iotune", "autostart")
# the calls that read a path without the seam: a recording that sees one of them is not answerable
PATH_CALLS = ("stat", "lstat", "listdir", "scandir", "readlink", "access")
# the reasons a recording keeps (the first few say enough)
MAX_REASONS = 5


def canonical(value):
    """``value`` as JSON can write it, the same for the same answer: bytes as hex, tuples and
    sets as lists (sets sorted), a libvirt object as its kind."""
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(canonical(item) for item in value)
    if isinstance(value, dict):
        return dict((str(key), canonical(item)) for key, item in value.items())
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return {"object": type(value).__name__}


def digest(outcome):
    """The digest of one read's outcome (``["value", ...]`` or ``["raise", type, message]``)."""
    return hashlib.sha256(json.dumps(outcome, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def outcome_of(call):
    """``(outcome, value, error)`` of ``call()``: what a read answered, as :func:`digest` takes it."""
    try:
        value = call()
    except Exception as exc:  # pylint: disable=broad-except
        # a read that raises answers with its error (a missing libvirt, a file the seam refuses)
        return ["raise", type(exc).__name__, str(exc)], None, exc
    return ["value", canonical(value)], value, None


class Recorder:
    """The reads of one run, each once, in the order first made, with the digest of each answer.
    Reads made inside a recorded read (a composite read's own reads, ``read_int`` over ``read``)
    are not recorded apart: the outer read answers for them."""

    def __init__(self):
        self.records = []
        self.digests = []
        self.reasons = []
        self._seen = {}
        self._depth = 0

    def refuse(self, reason):
        """This run's reads cannot answer for it: ``reason`` says why."""
        if len(self.reasons) < MAX_REASONS and reason not in self.reasons:
            self.reasons.append(reason)

    def read(self, record, call):
        """The answer of ``call()`` (raised as it raised), recorded as ``record`` (``[part, [[name,
        args], ...]]``) unless made inside another recorded read."""
        if self._depth:
            return call()
        self._depth += 1
        try:
            outcome, value, error = outcome_of(call)
        finally:
            self._depth -= 1
        self._keep(record, digest(outcome))
        if error is not None:
            raise error
        return value

    def _keep(self, record, answer):
        try:
            key = json.dumps(record, sort_keys=True)
        except (TypeError, ValueError):
            # arguments a read again could not be given (bytes for a program's input)
            self.refuse("%s takes arguments that are not JSON" % record[1][-1][0])
            return
        if key not in self._seen:
            self._seen[key] = answer
            self.records.append(record)
            self.digests.append(answer)
        elif self._seen[key] != answer:
            self.refuse("%s answered two ways in one run" % describe(record))

    @contextlib.contextmanager
    def guard(self):
        """While the block runs, a read of a path past the seam (``open``, ``os.stat``, ...) outside
        a recorded read refuses the recording, naming the path."""
        originals = [(os, name, getattr(os, name)) for name in PATH_CALLS] + [(builtins, "open", builtins.open)]
        for owner, name, original in originals:
            setattr(owner, name, self._watched(name, original))
        try:
            yield self
        finally:
            for owner, name, original in originals:
                setattr(owner, name, original)

    def _watched(self, name, original):
        def watched(*args, **kwargs):
            if not self._depth:
                self.refuse("%s(%s) past the seam" % (name, args[0] if args else ""))
            return original(*args, **kwargs)
        return watched

    def result(self):
        """What a run hands back with its result: the reads, their digests, and whether they can
        answer for the run (with the reasons when not)."""
        return {"records": self.records, "digests": self.digests, "answerable": not self.reasons,
                "reasons": list(self.reasons), "python": list(sys.version_info[:2])}


def describe(record):
    """A read as a person reads it: ``fs.read('/proc/cmdline')``."""
    part, calls = record
    return "%s.%s" % (part, ".".join("%s(%s)" % (call[0], ", ".join([repr(arg) for arg in call[1]] + [
        "%s=%r" % item for item in sorted((call[2] if len(call) > 2 else {}).items())])) for call in calls))


def _recorded_method(recorder, part, method, name):
    def recorded(*args, **kwargs):
        return recorder.read([part, [[name, list(args), kwargs]]], functools.partial(method, *args, **kwargs))
    return recorded


class RecordedLibvirt:
    """A libvirt :class:`Connection`, :class:`Domain` or :class:`Network` whose reads are
    recorded under the calls that reached it (``[uri, [[name, args], ...]]``); any other call
    (a define, a start) refuses the recording and is made as it is."""

    def __init__(self, target, recorder, uri, calls):
        self._target, self._recorder, self._uri, self._calls = target, recorder, uri, calls

    def __getattr__(self, name):
        attribute = getattr(self._target, name)
        if name not in LIBVIRT_READS or not callable(attribute):
            self._recorder.refuse("libvirt %s is not a read" % name)
            return attribute

        def recorded(*args):
            calls = self._calls + [[name, list(args)]]
            value = self._recorder.read(["libvirt", [["open", [self._uri]]] + calls], lambda: attribute(*args))
            if value is None or isinstance(value, (str, bytes, int, float, bool, list, tuple, dict, set)):
                return value
            return RecordedLibvirt(value, self._recorder, self._uri, calls)
        return recorded


def seam_parts(host):
    """The object of ``host`` that answers each part of :data:`READS`."""
    return {"fs": host.fs, "host": host, "commands": host.commands}


def record(host, recorder):
    """Make ``host`` (a bound :class:`seam.Host`) record its reads in ``recorder``."""
    for part, target in seam_parts(host).items():
        for name in READS[part] if target is not None else ():
            setattr(target, name, _recorded_method(recorder, part, getattr(target, name), name))
    opener = host.libvirt

    @contextlib.contextmanager
    def recorded_libvirt(uri):
        manager = opener(uri)
        connection = recorder.read(["libvirt", [["open", [uri]]]], manager.__enter__)
        try:
            yield RecordedLibvirt(connection, recorder, uri, [])
        finally:
            manager.__exit__(*sys.exc_info())
    host.libvirt = recorded_libvirt
    return host


def _read_libvirt(host, connections, uri, calls):
    """The answer of one recorded libvirt read, on a connection opened once per ``uri``."""
    if uri not in connections:
        stack = contextlib.ExitStack()
        try:
            connections[uri] = (stack, stack.enter_context(host.libvirt(uri)), None)
        except Exception as exc:  # pylint: disable=broad-except
            connections[uri] = (stack, None, exc)
    _stack, target, error = connections[uri]
    if error is not None:
        raise error
    for name, args in calls:
        target = getattr(target, name)(*args)
    return target


def read_again(host, records):
    """The digest of each read of ``records`` (a :meth:`Recorder.result`'s), made again on
    ``host`` now, in order: equal digests, equal answers. A record that is no read of the seam is
    an :class:`InputError` naming it, before any read is made."""
    parts = seam_parts(host)
    reads = [checked_record(number, item) for number, item in enumerate(records or [])]
    connections = {}
    digests = []
    try:
        for part, name, args, kwargs, uri in reads:
            if part == "libvirt":
                call = functools.partial(_read_libvirt, host, connections, uri, args)
            else:
                call = functools.partial(getattr(parts[part], name), *args, **kwargs)
            digests.append(digest(outcome_of(call)[0]))
    finally:
        for stack, _target, _error in connections.values():
            stack.close()
    return digests


def checked_record(number, item):
    """``(part, name, args, kwargs, uri)`` of one recorded read (for libvirt: ``name`` None, ``args``
    the calls after the connection's ``open``), or an :class:`InputError`."""
    try:
        part, calls = item
        if part == "libvirt":
            (opened, (uri,)), rest = calls[0], calls[1:]
            if opened == "open" and isinstance(uri, str) and all(name in LIBVIRT_READS and isinstance(args, list)
                                                                 for name, args in rest):
                return part, None, rest, {}, uri
        else:
            [(name, args, kwargs)] = calls
            if name in READS.get(part, ()) and isinstance(args, list) and isinstance(kwargs, dict):
                return part, name, args, kwargs, None
    except (TypeError, ValueError):
        pass
    raise InputError("records[%d]: %r is not a read this module makes again ([part, [[name, args, kwargs]]] as preflight_info "
                     "recorded it, part one of fs, host, commands, libvirt); nothing was read" % (number, item))
