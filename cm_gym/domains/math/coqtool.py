"""Finding Coq: the `coqc` executable, its version, and the index of its standard library.

Only the standard library (``coqc -where``/``theories``, logical prefix ``Coq``) may be loaded by
a script; packages installed next to it (``user-contrib``: Coquelicot, MathComp, Ltac2 …) may
not. A short library name (``Lia``) is resolved to its one full name (``Coq.micromega.Lia``) the
way ``Require`` resolves it (the full name ends with it), so the checker can emit the fully
qualified form and no other installed package can answer.
"""

from __future__ import annotations

import functools
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cm_gym.core.types import CmGymError
from cm_gym.evaluators.sandbox import ToolNotFoundError
from cm_gym.evaluators.tools import find_tool

logger = logging.getLogger(__name__)

INSTALL_HINT = "install it with `apt-get install -y coq` (Debian's Coq 8.16 with its standard library)"
#: standard-library directories a script may not load: extraction writes files when used
EXCLUDED_LIBRARY_PARTS = ("extraction", "MExtraction")


class LibraryError(CmGymError):
    """A required library is not in Coq's standard library, or its short name is ambiguous."""


def find_coqc() -> str:
    """Path of `coqc` ($CM_GYM_COQC or PATH); `ToolNotFoundError` with the install command."""
    return find_tool("coqc", "CM_GYM_COQC", "the Coq compiler", INSTALL_HINT)


@dataclass(frozen=True)
class CoqInstall:
    """One Coq installation: executable, ``--version`` text, standard-library root and the full
    logical names of its libraries (``Coq.micromega.Lia`` …)."""

    coqc: str
    version: str
    where: Path
    libraries: frozenset[str]

    @property
    def short_version(self) -> str:
        """``8.16.1`` from ``The Coq Proof Assistant, version 8.16.1 …``."""
        for word in self.version.replace(",", " ").split():
            if word[:1].isdigit():
                return word
        return self.version.strip()

    def resolve(self, name: str) -> str:
        """The one full standard-library name `name` denotes (``Require`` semantics: the full name
        ends with `name`; ``From Coq Require X`` arrives as ``Coq.X``). `LibraryError` otherwise."""
        parts = name.split(".")
        if not name or any(not p for p in parts):
            raise LibraryError(f"{name!r} is not a library name")
        candidates = {lib for lib in self.libraries if lib == name or lib.endswith("." + name)}
        if parts[0] == "Coq" and len(parts) > 1:
            tail = ".".join(parts[1:])
            candidates |= {lib for lib in self.libraries if lib.endswith("." + tail)}
        candidates = {c for c in candidates if not any(x in c.split(".") for x in EXCLUDED_LIBRARY_PARTS)}
        if not candidates:
            raise LibraryError(
                f"library {name!r} is not in Coq's standard library (only the stdlib may be loaded)"
            )
        if len(candidates) > 1:
            raise LibraryError(
                f"library name {name!r} is ambiguous ({', '.join(sorted(candidates)[:4])}); qualify it"
            )
        return next(iter(candidates))


@functools.lru_cache(maxsize=4)
def coq_install(coqc: str | None = None) -> CoqInstall:
    """Inspect the installation of `coqc` (default: `find_coqc()`); cached per process."""
    exe = coqc or find_coqc()
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
        where = subprocess.run([exe, "-where"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolNotFoundError(f"`{exe}` does not run ({exc}); {INSTALL_HINT}") from exc
    theories = Path(where) / "theories"
    if not version or not theories.is_dir():
        raise ToolNotFoundError(f"`{exe}` has no standard library at {theories}; {INSTALL_HINT}")
    libraries = frozenset(
        "Coq." + ".".join(p.relative_to(theories).with_suffix("").parts) for p in theories.rglob("*.vo")
    )
    logger.info("coq: %s (%d standard-library files)", version.splitlines()[0], len(libraries))
    return CoqInstall(exe, version.strip(), Path(where), libraries)
