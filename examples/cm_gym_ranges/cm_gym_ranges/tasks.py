"""The Ranges tasks: deterministic look-alike families of integer-range questions.

Each task asks for a list of integers in words; the reference action is the Python ``range(...)``
call that produces it. Families come in look-alike pairs that differ in one boundary word
("through" vs "up to but not including", "after" vs "from"), which is what makes a record learned
on one task right or wrong on the next.
"""

from __future__ import annotations

import random

from cm_gym.core.types import Task

#: (family, prompt template, reference template, features)
FAMILIES = (
    ("through", "List the integers from {a} through {b}.", "range({a}, {b1})", {"end": "inclusive"}),
    ("up_to", "List the integers from {a} up to but not including {b}.", "range({a}, {b})", {"end": "exclusive"}),
    ("after", "List the integers after {a} and before {b}.", "range({a1}, {b})", {"start": "exclusive"}),
    ("between_incl", "List the integers between {a} and {b}, both included.", "range({a}, {b1})", {"end": "inclusive"}),
    ("countdown", "Count down from {b} to {a}, both included.", "range({b}, {am1}, -1)", {"descending": True}),
    ("countdown_excl", "Count down from {b} to just above {a}.", "range({b}, {a}, -1)", {"descending": True}),
    ("every_k", "List every {k}th integer starting at {a} and staying below {b}.", "range({a}, {b}, {k})", {"step": True}),
)  # fmt: skip


def load_tasks(seed: int = 0, n_tasks: int = 140) -> list[Task]:
    """`n_tasks` tasks (default 140, 20 per family), deterministic for a given seed."""
    rng = random.Random(f"ranges:{seed}")
    tasks = []
    for i in range(n_tasks):
        family, prompt, reference, features = FAMILIES[i % len(FAMILIES)]
        a = rng.randint(-20, 40)
        b = a + rng.randint(4, 25)
        k = rng.randint(2, 5)
        values = {"a": a, "b": b, "b1": b + 1, "a1": a + 1, "am1": a - 1, "k": k}
        feats = {"end": "exclusive", "start": "inclusive", "descending": False, "step": False, **features}
        tasks.append(
            Task(
                task_id=f"ranges-{i:04d}",
                domain="ranges",
                prompt=prompt.format(**values),
                env_id="python-range",
                reference=reference.format(**values),
                family=family,
                features=feats,
            )
        )
    return tasks
