"""Verdicts of the world models that check in a killable worker (SAT, SMT), kept: in this
process, and across processes in the work memo (`cm_gym.core.workmemo`).

Why: the envs check the same actions of the same tasks over and over — in 1,000 random decisions
SAT-v0 made 1,260 checks of 200 distinct (task, action) pairs and SMT-v0 749 of 188 over 600 —
and each check is a round trip to the worker plus the solve; every fresh process (a new run,
each worker of a vector env) checks the same first drafts again. A check is deterministic:
conflicts (SAT) and z3's resource count (SMT) bound the search, never the clock. So the verdict
is a function of the engine and its configuration (`scope`), the task and the action text.

Keys:
- in this process: the task as the worker receives it (its plain-data pickle: id, prompt,
  reference, features, meta — a DIMACS or SMT-LIB *path*, which the worker's own per-path caches
  also key on) and the text;
- across processes: the same, with the scope, and the sha256 of the file a task's
  ``meta["path"]`` names (computed once per process and file state); a task whose file cannot be
  read is kept in this process only. The memo's file name carries the digest of the domains
  package's source and the python-sat and z3 versions, so an upgrade never reads an old verdict.

What is never kept: any verdict from a worker call that did not come back (the hang guard's
"infrastructure", a kill at the CPU backstop or the memory cap, a crash): those depend on the
machine. A kept verdict is the same `Outcome` (from another process: equal field for field);
Outcomes are never mutated after a check. `size` 0 turns the memo off (the world-model benches
do, to time every check); ``CM_GYM_WORK_MEMO=0`` keeps it in the process only.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from typing import Any

from cm_gym.core.types import Outcome
from cm_gym.core.workmemo import WorkMemo, library_versions, memo_key
from cm_gym.core.workmemo import enabled as work_memo_enabled
from cm_gym.domains.verdict_codec import decode_outcome, encode_outcome

#: verdicts kept in this process per evaluator (oldest dropped first)
CHECK_MEMO = 16_384
#: files larger than this are not hashed: verdicts on them stay in this process
MAX_HASHED_BYTES = 64 << 20

Key = tuple[bytes, str, str | None]


class CheckMemo:
    """Verdicts by (task payload, action text) within one `scope`; `size` 0 = off."""

    def __init__(self, scope: str = "", size: int = CHECK_MEMO) -> None:
        self.scope, self.size = scope, size
        self.hits = self.stored_hits = 0
        self._verdicts: dict[tuple[bytes, str], Outcome] = {}

    def __len__(self) -> int:
        return len(self._verdicts)

    def __getstate__(self) -> dict[str, Any]:  # a pickled evaluator starts empty
        return {"scope": self.scope, "size": self.size, "hits": 0, "stored_hits": 0, "_verdicts": {}}

    def key(self, plain_task: dict[str, Any], text: str) -> Key | None:
        """The key of checking `text` for the task the worker would receive (None: memo off, or a
        task that cannot be pickled: it goes to the worker, which reports why)."""
        if self.size <= 0:
            return None
        try:
            payload = pickle.dumps(plain_task, protocol=5)
        except Exception:  # noqa: BLE001 - checked (and refused) by the worker call instead
            return None
        meta = plain_task.get("meta")
        path = meta.get("path") if isinstance(meta, dict) else None
        return payload, text, path if isinstance(path, str) else None

    def get(self, key: Key | None) -> Outcome | None:
        """The kept verdict: from memory, else from the work memo (then kept in memory)."""
        if key is None:
            return None
        found = self._verdicts.get(key[:2])
        if found is not None:
            self.hits += 1
            return found
        stored = self._stored_key(key)
        data = _work().get(stored) if stored is not None else None
        found = decode_outcome(data) if data is not None else None
        if found is not None:
            self.stored_hits += 1
            self._keep(key, found)
        return found

    def put(self, key: Key | None, outcome: Outcome) -> None:
        """Keep a verdict the worker returned (the caller decides it came back)."""
        if key is None or outcome.status == "infrastructure":
            return
        self._keep(key, outcome)
        stored = self._stored_key(key)
        encoded = encode_outcome(outcome) if stored is not None else None
        if stored is not None and encoded is not None:
            _work().put(stored, encoded)

    def _keep(self, key: Key, outcome: Outcome) -> None:
        if len(self._verdicts) >= self.size:
            del self._verdicts[next(iter(self._verdicts))]
        self._verdicts[key[:2]] = outcome

    def _stored_key(self, key: Key) -> bytes | None:
        if not work_memo_enabled():
            return None
        payload, text, path = key
        digest = _file_digest(path) if path is not None else ""
        if digest is None:
            return None
        return memo_key("check", self.scope, payload.hex(), text, digest)


@functools.lru_cache(maxsize=1)
def _work() -> WorkMemo:
    """The memo (one per process; its version read once)."""
    from cm_gym.domains.base import Domain, source_digest

    return WorkMemo(
        "isolated-checks", f"{source_digest(Domain)}-{library_versions('python-sat', 'z3-solver')}"
    )


def _file_digest(path: str) -> str | None:
    """sha256 of the file (None when missing, unreadable or too large), cached per file state."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_size > MAX_HASHED_BYTES:
        return None
    return _digest_of(path, st.st_size, st.st_mtime_ns, st.st_ino)


@functools.lru_cache(maxsize=4096)
def _digest_of(path: str, size: int, mtime_ns: int, inode: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None
