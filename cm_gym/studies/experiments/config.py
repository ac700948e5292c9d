"""What one `cm-gym experiment` run is configured with, and the two sizes it comes in.

`Sizes` holds every size a study reads (split caps, selector training, checkpoints, orderings…);
`FULL` is the paper's configuration where it gives one and `QUICK` a smoke size that runs every
study in minutes on a small machine (the CI test runs ``all --quick``). Only the generated
benchmarks are defaults: they ship with the package (real-data benchmarks are one
``--benchmarks`` flag away).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: The paper's Table-1 domain column of each built-in benchmark's domain.
PAPER_DOMAIN = {
    "sql": "Text-to-SQL",
    "sat": "SAT",
    "code": "Coding",
    "humaneval": "Coding",
    "math": "Math",
    "coq": "Math",
    "lean": "Math",
    "smt": "SMT",
    "dafny": "Formal Verification",
}


@dataclass(frozen=True)
class Sizes:
    """Every size a study reads (None = no cap)."""

    n_build: int | None = None
    n_train: int | None = None
    n_eval: int | None = None
    total_decisions: int = 2000
    checkpoint_every: int = 250
    accumulation_checkpoints: tuple[int, ...] = (0, 25, 50, 100, 200)
    orderings: int = 5
    earlier_tasks: int = 25
    retention_capacity: int | None = None
    transfer_pairs: int = 60
    budget_build_tasks: int = 100
    matts: int = 3


FULL = Sizes()
QUICK = Sizes(
    n_build=24,
    n_train=16,
    n_eval=16,
    total_decisions=64,
    checkpoint_every=32,
    accumulation_checkpoints=(0, 8, 16, 24),
    orderings=2,
    earlier_tasks=8,
    transfer_pairs=8,
    budget_build_tasks=12,
    matts=2,
)


@dataclass(frozen=True)
class ExperimentConfig:
    """One experiment run: which benchmarks, agents, selector seeds and LLM, at which sizes, into
    which results directory, with how many local workers."""

    benchmarks: tuple[str, ...] = ("SQL", "SAT", "Code")
    agents: tuple[str, ...] = ("react", "reflexion")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    llm: str = "simulated"
    llm_seed: int = 0
    llm_cache: Path | None = None
    llm_cache_mode: str = "rw"
    #: client limits of a real endpoint (`cm_gym.llm.limits`); None: CM_GYM_LLM_*, else defaults
    llm_timeout: float | None = None
    llm_max_tokens: int | None = None
    llm_retries: int | None = None
    llm_concurrency: int | None = None
    max_decisions: int = 3
    #: keyword arguments of every unit's evaluator (``Domain.make_evaluator``), e.g. a Dafny study's
    #: ``rlimit``; they key the units (only when set: default keys stay) and are in every report
    evaluator_options: dict[str, Any] = field(default_factory=dict)
    #: the evaluator options that weaken a guard, allowed by ``--unsafe-evaluator-options``: one
    #: line each, in every report (`cm_gym.domains.evaluator_options`)
    unsafe_evaluator_options: tuple[str, ...] = ()
    split_seed: int = 12345
    quick: bool = False
    sizes: Sizes = FULL
    results_dir: Path = Path("runs/experiments")
    workers: int = 1
    #: "local" (this machine) or "ray" (a local Ray instance, or the cluster at `address`)
    backend: str = "local"
    address: str | None = None
    bootstrap: int = 2000
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def make(cls, quick: bool = False, **overrides: Any) -> ExperimentConfig:
        """Defaults for full or quick runs, with `overrides` (None values ignored) on top."""
        base = cls(
            benchmarks=("SQL",) if quick else cls.benchmarks,
            agents=("react",) if quick else cls.agents,
            seeds=(0,) if quick else cls.seeds,
            quick=quick,
            sizes=QUICK if quick else FULL,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    def describe(self) -> dict[str, Any]:
        """Plain data for reports."""
        return {
            "benchmarks": list(self.benchmarks),
            "agents": list(self.agents),
            "seeds": list(self.seeds),
            "llm": self.llm,
            "llm_seed": self.llm_seed,
            "llm_cache_mode": self.llm_cache_mode,
            "max_decisions": self.max_decisions,
            **({"evaluator_options": dict(self.evaluator_options)} if self.evaluator_options else {}),
            **(
                {"unsafe_evaluator_options": list(self.unsafe_evaluator_options)}
                if self.unsafe_evaluator_options
                else {}
            ),
            "split_seed": self.split_seed,
            "quick": self.quick,
            "sizes": {k: v for k, v in self.sizes.__dict__.items()},
            "bootstrap_resamples": self.bootstrap,
        }
