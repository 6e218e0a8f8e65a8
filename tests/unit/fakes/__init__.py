# -*- coding: utf-8 -*-
"""The one test kit: every fake the unit tests use lives in this package.

- ``commands.RecordedCommands``: the command runner of a test :class:`Host`, with the
  expected calls given as data (argv, rc, stdout, stderr);
- ``host_tree.FakeHost`` and ``kernel.FakeKernel``: a sysfs/procfs tree laid out like a
  real kernel's, and the kernel's side of the sysfs writes;
- ``standins/``: executables that replay real tool output formats and keep state like the
  real tools (nvidia-smi, mlxconfig, ip); tests that use them say so.

A module test builds ``Host(root=tmp, commands=..., kernel=...)`` and passes it to
``run_module(module.main, args, host=...)``; nothing else is patched.
"""

import os

STANDINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standins")
