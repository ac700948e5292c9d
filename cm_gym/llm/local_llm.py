"""``llm="local:<model>"``: a real coder model on this machine's CPUs answers every template.

`LocalLLM` assembles the pinned GGUF checkpoint (`cm_gym.llm.gguf_models`), starts llama.cpp
engines as child processes (`cm_gym.llm.llama_engine`: one per core, one thread each) on the first
live call (``CM_GYM_LOCAL_ENGINES`` overrides their number) — or attaches to the engines a running ``cm-gym serve-llm --model NAME`` published — and
sends each call through the OpenAI-compatible client (`cm_gym.llm.openai_client`: retries,
timeouts, clear errors) to a free engine, preferring the engine that answered the same prompt
prefix last (its KV cache holds that prefix). `make_llm` puts it behind the response cache, so a
run is resumable (the cache is the checkpoint) and replayable with ``--llm-cache-mode ro`` on a
machine with no engine and no weights: the cache identity names the checkpoint by its sha256, the
engine version, the prompt variants' digest and the decoding, never a port or a path.

Every template is answered by the model, with the small-model prompt variants of
`cm_gym.llm.prompts_small`; every reply is marked ``real:<model>`` (`Completion.provenance`), so
results count real and simulated replies (simulated: 0). Decoding is greedy (temperature 0) where
the frozen model answers — drafts, revisions, distillation, reflections, judging — and seeded
sampling (temperature 0.7, top-p 0.95, the run's seed) for GENERATE_LOCAL_ALTERNATIVES, where
the K candidates must differ.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cm_gym.core import boundedjson
from cm_gym.core.paths import cache_dir, cache_root
from cm_gym.llm.base import (
    BEST_OF_N_JUDGE,
    DISTIL_RECORD,
    GENERATE_LOCAL_ALTERNATIVES,
    REFLECT,
    Completion,
)
from cm_gym.llm.errors import LLMError
from cm_gym.llm.gguf_models import get_model, model_path
from cm_gym.llm.llama_engine import ENGINE, ENGINE_VERSION, Engine, default_engines, ready
from cm_gym.llm.prompts_small import PROMPTS_VERSION, prompts_digest, render_small
from cm_gym.llm.replies import real

logger = logging.getLogger(__name__)

#: Sampling of the calls whose K answers must differ (the others decode greedily).
SAMPLED = {GENERATE_LOCAL_ALTERNATIVES: {"temperature": 0.7, "top_p": 0.95}}
#: Reply length per template (others: `DEFAULT_MAX_TOKENS`); part of the cache identity.
MAX_TOKENS = {DISTIL_RECORD: 160, REFLECT: 96, BEST_OF_N_JUDGE: 16}
DEFAULT_MAX_TOKENS = 768  # a whole program (code domains) fits; SQL replies stop long before
#: GENERATE_LOCAL_ALTERNATIVES: room for K versions of the failed action and their fences, no more
#: (a small model that explains every version would otherwise spend minutes per call):
#: ``ALT_BASE + K * (ALT_PER_VERSION + len(action) // ALT_CHARS_PER_TOKEN)``, at most ``ALT_CAP``.
ALT_BASE, ALT_PER_VERSION, ALT_CHARS_PER_TOKEN, ALT_CAP = 32, 24, 3, 1024


def max_tokens_for(template: str, fields: Mapping[str, Any]) -> int:
    """The reply length limit of one call (a function of the cached fields only)."""
    if template == GENERATE_LOCAL_ALTERNATIVES:
        from cm_gym.llm.fields import derive_field

        try:
            k = max(1, min(8, int(derive_field("k", fields) or 4)))
        except ValueError:
            k = 4
        action = derive_field("action", fields)
        return min(ALT_CAP, ALT_BASE + k * (ALT_PER_VERSION + len(action) // ALT_CHARS_PER_TOKEN))
    return MAX_TOKENS.get(template, DEFAULT_MAX_TOKENS)


DEFAULT_TIMEOUT_S = 900.0  # one call of the 1.5B model on a loaded 2-core machine can take minutes
_AFFINITY_CHARS = 2000  # the prompt prefix that picks the preferred engine


def published_engines_file(model: str) -> Path:
    """Where ``cm-gym serve-llm --model NAME`` publishes its engines' URLs."""
    return cache_root() / "engines" / f"{model}.json"


def published_engines(model: str, sha256: str) -> list[str]:
    """The base URLs a live ``serve-llm`` publishes for `model` (empty when none answers)."""
    try:
        info = boundedjson.loads(published_engines_file(model).read_bytes(), max_bytes=65536, max_depth=8)
        pid, urls = int(info["pid"]), [str(u) for u in info["urls"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if info.get("sha256") != sha256 or not urls:
        return []
    try:
        os.kill(pid, 0)
    except OSError:
        return []
    return urls if all(ready(u) for u in urls) else []


class LocalLLM:
    """A pinned GGUF model on llama.cpp engines (see the module docstring)."""

    def __init__(
        self,
        model: str,
        *,
        seed: int = 0,
        engines: int | None = None,
        threads: int = 1,
        timeout: float | None = None,
        retries: int | None = None,
        prompt_cache: bool = False,
        attach: bool = True,
    ) -> None:
        self.spec = get_model(model)
        self.model, self.seed = self.spec.name, int(seed)
        self.name = f"local:{self.model}"
        self.provenance = real(self.model)
        self.n_engines = int(engines or os.environ.get("CM_GYM_LOCAL_ENGINES") or default_engines())
        self.threads, self.prompt_cache, self.attach = int(threads), bool(prompt_cache), bool(attach)
        self.timeout = float(timeout or DEFAULT_TIMEOUT_S)
        self.retries = retries
        self._engines: list[Engine] = []
        self._clients: list[dict[bool, Any]] = []
        self._free: list[bool] = []
        self._last_prefix: list[str] = []
        self._cond = threading.Condition()
        self._start_lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.load_s = 0.0
        self._published: Path | None = None

    # -- identity -----------------------------------------------------------------------------------
    def cache_identity(self) -> dict[str, Any]:
        """What a reply depends on: the checkpoint (sha256), the engine, the prompt variants and
        the decoding. Not the URL, the port or the number of engines."""
        return {
            "backend": "local",
            "model": self.model,
            "sha256": self.spec.sha256,
            "engine": f"{ENGINE} {ENGINE_VERSION}",
            "prompts": f"v{PROMPTS_VERSION}-{prompts_digest()}",
            "decoding": {
                "greedy": 0.0,
                "sampled": SAMPLED,
                "max_tokens": MAX_TOKENS,
                "default_max_tokens": DEFAULT_MAX_TOKENS,
                "alternatives_max_tokens": [ALT_BASE, ALT_PER_VERSION, ALT_CHARS_PER_TOKEN, ALT_CAP],
            },
            "seed": self.seed,
        }

    # -- engines ------------------------------------------------------------------------------------
    def start(self) -> LocalLLM:
        """Attach to published engines or start our own (idempotent; thread-safe)."""
        with self._start_lock:
            if self._clients:
                return self
            started = time.perf_counter()
            urls = published_engines(self.model, self.spec.sha256) if self.attach else []
            if urls:
                logger.info("%s: using the %d engine(s) of a running serve-llm", self.name, len(urls))
            else:
                path = model_path(self.model)
                for i in range(self.n_engines):
                    engine = Engine(
                        path, self.model, threads=self.threads, seed=self.seed, prompt_cache=self.prompt_cache
                    )
                    self._engines.append(engine)
                    try:
                        engine.start()
                    except BaseException:
                        self.close()
                        raise
                    logger.info(
                        "%s: engine %d/%d ready in %.1f s", self.name, i + 1, self.n_engines, engine.ready_s
                    )
                urls = [e.base_url for e in self._engines]
            self._clients = [self._make_clients(u) for u in urls]
            with self._cond:
                self._free = [True] * len(urls)
                self._last_prefix = [""] * len(urls)
            self.load_s = time.perf_counter() - started
        return self

    def _make_clients(self, url: str) -> dict[bool, Any]:
        from cm_gym.llm.openai_client import OpenAICompatibleLLM

        def client(sampled: bool) -> OpenAICompatibleLLM:
            extra = SAMPLED[GENERATE_LOCAL_ALTERNATIVES] if sampled else {"temperature": 0.0}
            return OpenAICompatibleLLM(
                url, self.model, "EMPTY", seed=self.seed, timeout=self.timeout, max_retries=self.retries,
                max_tokens=DEFAULT_MAX_TOKENS, name=self.name, **extra,
            )  # fmt: skip

        return {False: client(False), True: client(True)}

    def close(self) -> None:
        """Stop the engines this backend started (not those of a serve-llm it attached to)."""
        engines, self._engines = self._engines, []
        for engine in engines:
            engine.stop()
        self._clients = []
        published, self._published = self._published, None
        if published is not None:
            published.unlink(missing_ok=True)

    def engine_cpu_seconds(self) -> float:
        return sum(e.cpu_seconds() for e in self._engines)

    # -- calls --------------------------------------------------------------------------------------
    def _acquire(self, prefix: str) -> int:
        with self._cond:
            while True:
                free = [i for i, f in enumerate(self._free) if f]
                if free:
                    same = [i for i in free if self._last_prefix[i] == prefix]
                    i = (
                        same[0]
                        if same
                        else free[int(hashlib.sha256(prefix.encode()).hexdigest(), 16) % len(free)]
                    )
                    self._free[i] = False
                    self._last_prefix[i] = prefix
                    return i
                self._cond.wait()

    def _release(self, i: int) -> None:
        with self._cond:
            self._free[i] = True
            self._cond.notify()

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Answer one cm_gym call with the model (one `LLMError` if the engine fails)."""
        messages = render_small(template, fields)
        return self.complete_messages(messages, template, max_tokens_for(template, fields))

    def complete_messages(
        self, messages: list[dict[str, str]], template: str = "request", max_tokens: int | None = None
    ) -> Completion:
        """Send chat messages to a free engine (greedy, or sampled for the templates in `SAMPLED`)."""
        self.start()
        prefix = (messages[0]["content"] + "\n" + messages[-1]["content"])[:_AFFINITY_CHARS]
        i = self._acquire(prefix)
        started = time.perf_counter()
        try:
            client = self._clients[i][template in SAMPLED]
            client.max_tokens = int(max_tokens or MAX_TOKENS.get(template, DEFAULT_MAX_TOKENS))
            completion = client.complete_messages(messages, template)
        except LLMError as exc:
            engine = self._engines[i] if i < len(self._engines) else None
            if engine is not None and not engine.alive():
                raise LLMError(
                    f"{self.name}: the engine {engine.exit_reason()}; rerun to resume from the cache"
                ) from exc
            raise
        finally:
            self._release(i)
        self.calls[template] += 1
        self.seconds[template] += time.perf_counter() - started
        return dataclasses.replace(completion, provenance=self.provenance)

    def complete_chat(self, messages: list[dict[str, str]], request: Mapping[str, Any]) -> Completion:
        """Answer chat messages (what `cm-gym serve-llm` calls): messages rendered by a cm_gym
        template get the small-model variant of that template, any others go to the model as
        they are."""
        from cm_gym.llm.errors import PromptError
        from cm_gym.llm.prompts import parse_rendered

        try:
            template, fields = parse_rendered(messages)
        except PromptError:
            plain = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
            return self.complete_messages(plain, "chat")
        return self.complete(template, fields)

    def __enter__(self) -> LocalLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def publish(self) -> Path:
        """Write this process's engines where other runs find them (`published_engines`)."""
        path = cache_dir("engines") / f"{self.model}.json"
        urls = [e.base_url for e in self._engines]
        path.write_text(
            json.dumps({"pid": os.getpid(), "urls": urls, "sha256": self.spec.sha256, "model": self.model})
        )
        self._published = path
        return path
