"""Plain ``pickle`` for the selection env: rebuild what cannot travel, keep the episode.

A domain's predicates and error operators may be lambdas, an evaluator may hold SQLite
connections, an LLM client may hold sockets. So the env pickles its constructor arguments (with
the resolved task list and the frozen store object, so loading needs neither the data folder nor
the snapshot file) plus every other attribute (the episode in progress, counters, the RNG);
loading calls ``__init__`` with those arguments and then restores the attributes. This is
Gymnasium's ``EzPickle`` idea, extended to keep a running episode.
"""

from __future__ import annotations

from typing import Any

#: Attributes rebuilt by ``__init__`` on load rather than pickled.
REBUILT = frozenset(
    {
        "_init_kwargs",
        "benchmark_spec",
        "domain",
        "store",
        "embedder",
        "llm",
        "evaluator",
        "_agent",
        "_retriever",
        "_first_decisions",  # memos (`envs._observation`), refilled on use
        "_record_views",
        "_transitions",  # (`envs._transitions`)
    }
)


class RebuildOnUnpickle:
    """Mixin: the class's ``__init__`` must store its arguments in ``self._init_kwargs`` and set
    ``tasks``, ``store`` and ``llm`` (the resolved objects)."""

    _init_kwargs: dict[str, Any]

    def __getstate__(self) -> dict[str, Any]:
        init = dict(self._init_kwargs, tasks=list(self.tasks), store=self.store)  # type: ignore[attr-defined]
        episode = {k: v for k, v in self.__dict__.items() if k not in REBUILT}
        return {"init": init, "episode": episode}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["init"])  # type: ignore[misc]
        self.__dict__.update(state["episode"])
