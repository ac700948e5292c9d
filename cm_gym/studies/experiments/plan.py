"""Planning units for the studies: the split of each benchmark and the unit factories every study
shares (a CounterMem store, its selectors and their evaluations; a baseline's build and
evaluation), so two studies asking for the same thing ask for the same unit — and the runner
computes it once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cm_gym.core.splits import make_split
from cm_gym.core.types import Split, Task
from cm_gym.domains.registry import get_benchmark
from cm_gym.studies.experiments.config import ExperimentConfig
from cm_gym.studies.experiments.runner import Resources, Unit
from cm_gym.studies.experiments.units import benchmark_tasks, data_version


class Planner:
    """Unit factories over one `ExperimentConfig`."""

    def __init__(self, cfg: ExperimentConfig) -> None:
        self.cfg = cfg
        self._splits: dict[str, Split] = {}
        #: where the LLM response cache lives and its mode: they must not change results, so they
        #: travel with every unit without entering its key
        self.runtime = {
            "llm_cache": str(cfg.llm_cache) if cfg.llm_cache else None,
            "llm_cache_mode": cfg.llm_cache_mode,
            "llm_timeout": cfg.llm_timeout,
            "llm_retries": cfg.llm_retries,
            "llm_concurrency": cfg.llm_concurrency,
        }

    # -- data -------------------------------------------------------------------------------
    def tasks(self, benchmark: str) -> dict[str, Task]:
        return benchmark_tasks(benchmark)

    def split(self, benchmark: str) -> Split:
        """The protocol's split (C.3, Eq. 14 checked), capped by the configured sizes."""
        if benchmark not in self._splits:
            spec = get_benchmark(benchmark)
            s = make_split(
                list(self.tasks(benchmark).values()), seed=self.cfg.split_seed, kind=spec.split_kind()
            )
            z = self.cfg.sizes
            train = s.train[: z.n_train] if z.n_train else s.train
            validation = tuple(t for t in s.validation if t in set(train)) or train[: max(1, len(train) // 5)]
            split = Split(
                s.build[: z.n_build] if z.n_build else s.build,
                train,
                validation,
                s.eval[: z.n_eval] if z.n_eval else s.eval,
            )
            split.check()
            self._splits[benchmark] = split
        return self._splits[benchmark]

    def base(self, benchmark: str, agent: str) -> dict[str, Any]:
        """Parameters every unit of a (benchmark, agent) setting shares."""
        return {
            "benchmark": benchmark,
            "data": data_version(benchmark),
            "agent": agent,
            "llm": self.cfg.llm,
            "llm_seed": self.cfg.llm_seed,
            "max_decisions": self.cfg.max_decisions,
            # max_tokens changes replies, so it keys the units (only when set: default keys stay)
            **({"llm_max_tokens": self.cfg.llm_max_tokens} if self.cfg.llm_max_tokens is not None else {}),
            # evaluator options change verdicts (e.g. a budget), so they key the units (only when set)
            **(
                {"evaluator": dict(sorted(self.cfg.evaluator_options.items()))}
                if self.cfg.evaluator_options
                else {}
            ),
        }

    # -- CounterMem ------------------------------------------------------------------------
    def store(
        self,
        benchmark: str,
        agent: str,
        *,
        build_ids: Sequence[str] | None = None,
        checkpoints: Sequence[int] = (),
        token_budget: int | None = None,
        label: str = "",
        **construction: Any,
    ) -> Unit:
        """CounterMem construction on `build_ids` (default: the split's build tasks), optionally
        stopping once its construction tokens reach `token_budget`."""
        ids = list(build_ids if build_ids is not None else self.split(benchmark).build)
        params = {
            **self.base(benchmark, agent),
            "build_ids": ids,
            "checkpoints": sorted(set(int(c) for c in checkpoints)),
            "construction": dict(sorted(construction.items())),
        }
        if token_budget is not None:
            params["token_budget"] = int(token_budget)
        return Unit("store", params, label=label or f"store {benchmark}/{agent}", runtime=self.runtime)

    def selector(self, store: Unit, benchmark: str, agent: str, seed: int, snapshot: str = "final") -> Unit:
        """One masked-DQN seed on `store` (trained on the split's train tasks)."""
        split = self.split(benchmark)
        params = {
            **self.base(benchmark, agent),
            "build_ids": list(split.build),
            "train_ids": list(split.train),
            "validation_ids": list(split.validation),
            "eval_ids": list(split.eval),
            "seed": int(seed),
            "total_decisions": self.cfg.sizes.total_decisions,
            "checkpoint_every": self.cfg.sizes.checkpoint_every,
            "snapshot": snapshot,
        }
        return Unit(
            "selector",
            params,
            {"store": store},
            label=f"selector {benchmark}/{agent} seed {seed}",
            runtime=self.runtime,
        )

    def countermem_eval(
        self,
        benchmark: str,
        agent: str,
        store: Unit,
        *,
        selector: Unit | None = None,
        policy: str = "top1",
        task_ids: Sequence[str] | None = None,
        retrieval: str = "matched",
        use_conditions: bool = True,
        snapshot: str = "final",
        seed: int = 0,
        label: str = "",
    ) -> Unit:
        """A frozen CounterMem run: the store's snapshot with a trained selector (or a rule)."""
        params = {
            **self.base(benchmark, agent),
            "mechanism": "countermem",
            "task_ids": list(task_ids if task_ids is not None else self.split(benchmark).eval),
            "retrieval": retrieval,
            "use_conditions": bool(use_conditions),
            "snapshot": snapshot,
            "seed": int(seed),
            "policy": None if selector is not None else policy,
        }
        deps = {"store": store, **({"selector": selector} if selector is not None else {})}
        return Unit(
            "evaluate", params, deps, label=label or f"eval CF Memory {benchmark}/{agent} seed {seed}"
        )

    def cf_memory(
        self,
        benchmark: str,
        agent: str,
        *,
        task_ids: Sequence[str] | None = None,
        store: Unit | None = None,
        **kw: Any,
    ) -> list[Unit]:
        """The full method: the default store, one selector per seed, one evaluation per seed."""
        store = store or self.store(benchmark, agent)
        return [
            self.countermem_eval(
                benchmark,
                agent,
                store,
                selector=self.selector(store, benchmark, agent, s),
                task_ids=task_ids,
                seed=s,
                **kw,
            )
            for s in self.cfg.seeds
        ]

    # -- baselines --------------------------------------------------------------------------
    def mechanism(
        self,
        benchmark: str,
        agent: str,
        name: str,
        mparams: dict[str, Any] | None = None,
        build_ids: Sequence[str] | None = None,
    ) -> Unit:
        """A baseline built on `build_ids` (default: the split's build tasks)."""
        params = {
            **self.base(benchmark, agent),
            "mechanism": name,
            "mparams": dict(sorted((mparams or {}).items())),
            "build_ids": list(build_ids if build_ids is not None else self.split(benchmark).build),
        }
        return Unit("mechanism", params, label=f"build {name} {benchmark}/{agent}", runtime=self.runtime)

    def mechanism_eval(
        self,
        benchmark: str,
        agent: str,
        name: str,
        mparams: dict[str, Any] | None = None,
        *,
        built: Unit | None = None,
        task_ids: Sequence[str] | None = None,
        label: str = "",
    ) -> Unit:
        """A frozen run of a baseline (built on the split's build tasks unless `built` is given;
        mechanisms without memory — none, best_of_n, wm_without_cf — need no build)."""
        if built is None and name not in ("none", "best_of_n", "wm_without_cf"):
            built = self.mechanism(benchmark, agent, name, mparams)
        params = {
            **self.base(benchmark, agent),
            "mechanism": name,
            "mparams": dict(sorted((mparams or {}).items())),
            "task_ids": list(task_ids if task_ids is not None else self.split(benchmark).eval),
        }
        deps = {"mechanism": built} if built is not None else {}
        return Unit(
            "evaluate", params, deps, Resources(), label or f"eval {name} {benchmark}/{agent}", self.runtime
        )
