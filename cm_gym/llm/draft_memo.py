"""The default simulator's drafts kept across processes (work memo ``simulated-drafts``).

A simulated DRAFT_ACTION reply is a pure function of (seed, the task, the failed attempts, the
agent) and of the domain's error model (`cm_gym.llm.simulated`, module doc): the slips are seeded
draws, the fixes too, and each slip is applied by the domain's operator with a seeded generator.
Computing one seeds a generator per operator and per fix attempt and, in SQL, parses the
reference: about 0.4 ms for each task a process drafts first, a fifth of a fresh SQL-v0
process's CPU over its first 2,000 decisions (`bench/bench_env.py`), and a fresh process drafts
the same tasks again, so the drafts go into the persistent work memo (`cm_gym.core.workmemo`).

What is kept, and what never is (`revision.kept_across_processes`, as for the candidates):
only drafts of cm_gym's own domains (a plugin's error model is not known to be pure), of a task
whose edits read nothing but the task (`Domain.edits_from_task_alone`: SQL's extended grammar
reads the database to change a value's casing), and of a simulator without a fitted profile (the
caller checks: a profile's builder is a plugin's code too). The key holds the task's whole
content, reference included (the draft is the reference with slips applied); the version holds
the digests of the domains package (error models and operators) and of the simulator's module
and this one, and the versions of the libraries the operators parse with.

Not kept: the one-record revisions themselves (keyed by their rendered messages). Tried: a fresh
SQL-v0 process with the memo one other seed left ran 0.92x as fast with them (median of 6
interleaved pairs, `bench/bench_env.py --compare`): hashing each prompt cost more than the hits
saved, and the candidates behind a revision are kept already.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from cm_gym.core import workmemo
from cm_gym.core.types import Task, task_text
from cm_gym.core.workmemo import WorkMemo
from cm_gym.domains.base import Domain

#: one stored draft (an action: a query, a formula file, a program)
MAX_DRAFT_BYTES = 4 * 1024 * 1024


def draft_key(seed: int, task: Task, failed_attempts: int, agent: str) -> bytes:
    """The key of one draft: the seed, every field of the task (`task_text` and the reference),
    the failed attempts and the agent kind."""
    return workmemo.memo_key(
        "draft", str(seed), task.domain, task_text(task), task.reference, str(int(failed_attempts)), agent
    )


def decode_draft(data: bytes | str) -> str:
    """A stored draft; anything else (too long, not UTF-8) raises ValueError: a miss."""
    if len(data) > MAX_DRAFT_BYTES:
        raise ValueError("stored draft too long")
    return data if isinstance(data, str) else data.decode("utf-8")


@functools.lru_cache(maxsize=1)
def draft_work() -> WorkMemo:
    """The memo (one per process); its version as the module doc says."""
    from cm_gym.domains.base import source_digest

    here = Path(__file__).parent
    makers = hashlib.sha256((here / "simulated.py").read_bytes() + Path(__file__).read_bytes())
    libraries = workmemo.library_versions("sqlglot", "python-sat", "z3-solver")
    return WorkMemo("simulated-drafts", f"{source_digest(Domain)}-{makers.hexdigest()[:16]}-{libraries}")
