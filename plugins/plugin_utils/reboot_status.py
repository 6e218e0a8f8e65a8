# -*- coding: utf-8 -*-
# Copyright: gpuvirt.tenancy contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side helper of the host_reboot action: when a reboot that waits for its host prints a
status line, and what the line says. Pure: the clock is given."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# A connection error can be a whole SSH banner: the line keeps its last line, cut here.
ERROR_CHARS = 160


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
