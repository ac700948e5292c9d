"""Modules loaded on first use (`lazy_module`), for the solver libraries a process may never touch.

Why: ``import cm_gym`` loads every built-in domain (the registry's entry points), and the SAT and
SMT domains imported python-sat and z3 at module level: 12,000 objects and 59 ms of CPU in every
process, a SQL-only training run included, and objects the garbage collector scans on every full
collection. The standard library's `importlib.util.LazyLoader` defers a module's execution to the
first attribute read (``z3.Context``), so a process that never checks a formula never loads z3,
and one that does loads it exactly as ``import z3`` would (the same module object, in
``sys.modules``). Annotations are strings (``from __future__ import annotations``), so they never
trigger it.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

_LOCK = threading.Lock()


def lazy_module(name: str) -> ModuleType:
    """The module `name`: the loaded one when it is already imported, else a module that executes
    itself on its first attribute read. Raises `ModuleNotFoundError` now when it is not installed
    (as ``import name`` would), never later at first use."""
    with _LOCK:
        found = sys.modules.get(name)
        if found is not None:
            return found
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        loader = importlib.util.LazyLoader(spec.loader)
        spec.loader = loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        loader.exec_module(module)
        return module
