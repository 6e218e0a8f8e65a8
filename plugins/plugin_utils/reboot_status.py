# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side helper of the host_reboot action: when a reboot that waits for its host prints a
status line, and what the line says. Pure: the clock is given."""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

# A connection error can be a whole SSH banner: the line keeps its last line, cut here.
ERROR_CHARS = 160
DEFAULT_STATUS_INTERVAL = 30


def status_interval_seconds(value):
    """The ``status_interval`` option (given: the caller applies the default when it is not) as
    seconds: an int, or a string of decimal digits (a value templated into a string), 0 or more.
    A boolean (``true`` is no number of seconds, though Python takes it for 1), a fraction, a
    negative number, None or any other text is a ValueError whose message names the value given
    and the fix."""
    seconds = None
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = value
    elif isinstance(value, str) and re.match(r"^\s*[0-9]+\s*$", value):
        seconds = int(value)
    if seconds is None or seconds < 0:
        raise ValueError("status_interval: %r (%s) is not a whole number of seconds, 0 or more; give status_interval: 30 "
                         "(seconds between the status lines) or 0 (no status line)" % (value, type(value).__name__))
    return seconds


class RebootWaitStatus:
    """The status lines of one host's reboot: one after a failed attempt to reach the host when
    ``interval`` seconds or more passed since the reboot began or since the last line; none when
    ``interval`` is 0."""

    def __init__(self, host, bound, interval, clock):
        self.host = host
        self.bound = bound
        self.interval = interval
        self.clock = clock
        self.began = clock()
        self.last_line = self.began

    def after_failed_attempt(self, step, error):
        """-> the line to print after an attempt of ``step`` failed with ``error``, or None."""
        now = self.clock()
        if not self.interval or now - self.last_line < self.interval:
            return None
        self.last_line = now
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        reason = lines[-1] if lines else "no answer"
        if len(reason) > ERROR_CHARS:
            reason = reason[:ERROR_CHARS - 3] + "..."
        return "REBOOT WAIT %s: %d s of %s s, not back yet (%s: %s)" % (self.host, int(now - self.began), self.bound, step, reason)


def kernel_arg_list(value, name):
    """A list of kernel command-line arguments as the task hands it over; unset (none, "") is []."""
    if value is None or value == "":
        return []
    if not isinstance(value, (list, tuple)) or not all(isinstance(arg, str) for arg in value):
        raise ValueError("%s: %r is not a list of kernel command-line arguments; give a list such as [intel_iommu=on, iommu=pt] "
                         "(the boot stage gives its result's args_missing and args_unwanted)" % (name, value))
    return list(value)


def reboot_proof(boot_id_before, boot_id_after, cmdline, wanted=None, unwanted=None):
    """Whether a reboot is proven: ``{ok, problems, message}``. A boot id read before the reboot
    and another one after it (/proc/sys/kernel/random/boot_id: a new one at every boot), every
    argument of ``wanted`` on the new command line (``cmdline``, the text of /proc/cmdline) as
    written, none of ``unwanted``. ValueError names a list that is not one of arguments."""
    wanted = kernel_arg_list(wanted, "cmdline_wanted")
    unwanted = kernel_arg_list(unwanted, "cmdline_unwanted")
    old_id = (boot_id_before or "").strip()
    new_id = (boot_id_after or "").strip()
    running = (cmdline or "").split()
    missing = [arg for arg in wanted if arg not in running]
    still = [arg for arg in unwanted if arg in running]
    problems = []
    if not old_id:
        problems.append("no boot id was read before the reboot")
    elif new_id == old_id:
        problems.append("the boot id is still %s: the host did not boot again" % old_id)
    if missing:
        problems.append("the new command line lacks %s" % " ".join(missing))
    if still:
        problems.append("the new command line still has %s" % " ".join(still))
    message = "boot id %s -> %s; the kernel runs with %s" % (old_id or "?", new_id or "?", " ".join(running))
    if problems:
        message += "; " + "; ".join(problems) + " (is the edited boot entry the default one? docs/boot.md)"
    return {"ok": not problems, "problems": problems, "message": message}
