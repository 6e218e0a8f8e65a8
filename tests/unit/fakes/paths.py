# -*- coding: utf-8 -*-
"""Where the test kit's stand-in executables live."""

from __future__ import annotations

import os

STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")
