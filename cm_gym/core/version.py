"""The package version (one place; the root package, provenance blocks and store keys read it)."""

from __future__ import annotations

__version__ = "0.1.0"
