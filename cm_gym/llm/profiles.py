"""Named simulator profiles: ``llm="simulated:<profile>"``.

A profile is an error model of the simulated LLM fitted to the published outputs of one real
system (``cm_gym/llm/profiles/<name>.json``, written by ``python bench/bench_error_profiles.py
--fit``): which domain it covers, the function that builds its `ErrorModel` from its parameters
(``"module:function"``, in the domain's package), the fitted parameters (slip rates and, when
fitted, a two-class task difficulty that makes slips co-occur on hard tasks — never the outputs
themselves), where they come from and how close the fit landed. ``simulated`` and
``simulated:default`` are the built-in error models of every domain, bit-identical to what
``simulated`` always was.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cm_gym.domains.base import ErrorModel, ErrorOperator
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

DEFAULT = "default"
PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True)
class Profile:
    """One fitted profile (see the module doc)."""

    name: str
    domain: str
    builder: str
    params: Mapping[str, Any]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """A hash of what changes the drafts (domain, builder, parameters): part of the cache key."""
        blob = json.dumps([self.domain, self.builder, self.params], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def error_model(self, domain_name: str) -> ErrorModel:
        """The profile's error model for `domain_name`; an `LLMError` for a domain it does not cover."""
        if domain_name != self.domain:
            raise LLMError(
                f"simulator profile {self.name!r} is fitted to the {self.domain!r} domain, not {domain_name!r}; "
                f"use plain 'simulated' there, or a profile of that domain ({', '.join(profiles_for(domain_name)) or 'none'})"
            )
        module, _, func = self.builder.partition(":")
        try:
            build = getattr(importlib.import_module(module), func)
        except (ImportError, AttributeError) as exc:
            raise LLMError(
                f"simulator profile {self.name!r}: cannot load its builder {self.builder!r} ({exc})"
            ) from None
        model = build(self.params)
        difficulty = self.params.get("difficulty")
        return (
            with_difficulty(model, float(difficulty["share"]), float(difficulty["mass"]))
            if difficulty
            else model
        )


def task_multiplier(task_id: str, share: float, mass: float) -> float:
    """A task's slip-rate multiplier under a two-class difficulty: a stable `share` of the tasks
    (by a hash of the task id, the same for every LLM seed) is *hard* and carries `mass` of the
    slip probability (×mass/share), the rest ×(1−mass)/(1−share); the mean is 1."""
    u = int.from_bytes(hashlib.blake2b(task_id.encode(), digest_size=8).digest(), "big") / 2.0**64
    return mass / share if u < share else (1.0 - mass) / (1.0 - share)


def with_difficulty(model: ErrorModel, share: float, mass: float) -> ErrorModel:
    """`model` with every slip's probability times `task_multiplier` (capped at 0.95): slips then
    co-occur on hard tasks, as real systems' mistakes do (several kinds in one wrong answer)."""
    if not (0.0 < share < 1.0 and share <= mass < 1.0):
        raise LLMError(f"difficulty needs 0 < share <= mass < 1, got share {share}, mass {mass}")

    def scaled(op: ErrorOperator) -> ErrorOperator:
        return dataclasses.replace(
            op, probability=lambda t: min(0.95, op.probability(t) * task_multiplier(t.task_id, share, mass))
        )

    return dataclasses.replace(model, operators=tuple(scaled(op) for op in model.operators))


def profile_names() -> list[str]:
    """Every selectable profile: ``default`` and the shipped fitted ones, sorted."""
    return [DEFAULT, *sorted(p.stem for p in PROFILE_DIR.glob("*.json"))]


def profiles_for(domain_name: str) -> list[str]:
    """The fitted profiles that cover `domain_name`."""
    return [n for n in profile_names()[1:] if load_profile(n).domain == domain_name]  # type: ignore[union-attr]


@functools.lru_cache(maxsize=64)
def load_profile(name: str | None) -> Profile | None:
    """The profile `name` (None for ``default``); an unknown name or a malformed file is one
    `LLMError` naming the known profiles or the file."""
    if name in (None, "", DEFAULT):
        return None
    path = PROFILE_DIR / f"{name}.json"
    if not path.is_file() or "/" in name or name.startswith("."):
        raise LLMError(f"unknown simulator profile {name!r}; known: {', '.join(profile_names())}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Profile(
            name=name,
            domain=str(data["domain"]),
            builder=str(data["builder"]),
            params=data["params"],
            meta={k: v for k, v in data.items() if k not in ("domain", "builder", "params")},
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LLMError(f"simulator profile file {path} is malformed ({exc})") from None


def write_profile(name: str, domain: str, builder: str, params: Mapping[str, Any], meta: Mapping[str, Any],
                  folder: Path = PROFILE_DIR) -> Path:  # fmt: skip
    """Write a fitted profile file (what the fitting bench calls); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    body = {"name": name, "domain": domain, "builder": builder, "params": params, **meta}
    path.write_text(json.dumps(body, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    load_profile.cache_clear()
    logger.info("wrote simulator profile %s", path)
    return path
