# -*- coding: utf-8 -*-
"""A fake monotonic clock for code that takes its clock (and sleep) as a seam: reading it gives
``now``; ``sleep`` advances it instead of waiting."""

from __future__ import annotations


class Clock:
    def __init__(self, start=0.0):
        self.now = float(start)

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
