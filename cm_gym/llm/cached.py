"""`CachedLLM`: any `LLM` behind a `ResponseCache`, so replays are exact and cost no tokens.

A hit returns the recorded text with the recorded token counts (what the call *would* have cost)
and ``cached=True``. A miss in "rw" calls the backend once — concurrent threads asking for the
same key wait for that one call — and returns the reply the cache holds afterwards (another
process may have stored its reply first; everybody then uses that one). In "ro" a miss is one
`CacheMissError` naming the template and the task, and the backend is never called.
`prefetch` fills the cache for many independent calls at once, with bounded concurrency
(`cm_gym.llm.batch`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cm_gym.llm.base import LLM, Completion
from cm_gym.llm.batch import fetch_all
from cm_gym.llm.cache import request_payload
from cm_gym.llm.call_request import CallRequest  # defined below this module and batch; still importable here
from cm_gym.llm.prompts import render
from cm_gym.llm.replies import ReplyCounts

if TYPE_CHECKING:
    from cm_gym.llm.cache import ResponseCache

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 8


def backend_identity(llm: LLM) -> dict[str, Any]:
    """A backend's identity for cache keys: its `cache_identity()` if it has one."""
    identity = getattr(llm, "cache_identity", None)
    if callable(identity):
        return dict(identity())
    return {"backend": type(llm).__qualname__, "name": getattr(llm, "name", "")}


def cached_llm_of(llm: Any) -> CachedLLM | None:
    """The `CachedLLM` under `llm` (through wrappers that keep it as ``.inner``), if its cache can
    be written: where `prefetch` can fill the cache ahead of the calls."""
    for _ in range(8):
        if isinstance(llm, CachedLLM):
            return llm if llm.cache.mode == "rw" and llm.cache.writable else None
        llm = getattr(llm, "inner", None)
        if llm is None:
            return None
    return None


def completion_from(value: Mapping[str, Any], *, cached: bool) -> Completion:
    return Completion(
        str(value["text"]),
        int(value["prompt_tokens"]),
        int(value["completion_tokens"]),
        cached=cached,
        estimated=bool(value.get("estimated", False)),
        provenance=str(value.get("provenance", "")),
    )


class CachedLLM:
    """Wraps any `LLM` with a `ResponseCache` (see the module docstring). `concurrency` bounds the
    parallel calls of `prefetch`."""

    def __init__(self, inner: LLM, cache: ResponseCache, *, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.inner, self.cache = inner, cache
        self.name = getattr(inner, "name", "llm")
        self.concurrency = max(1, int(concurrency))
        self.live_calls = 0  # backend calls made through this wrapper (prefetch included)
        self.live_prompt_tokens = self.live_completion_tokens = 0
        self._identity = backend_identity(inner)
        self._flights: dict[str, Future[Completion]] = {}
        self._flight_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self.replies = ReplyCounts()  # replies marked real / simulated, hits and misses alike

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)

    # -- the pieces (used by `complete`, `prefetch` and `cm_gym.llm.batch`) ------------------------
    def request(self, template: str, fields: Mapping[str, Any]) -> CallRequest:
        """The cache request of one call: its key and rendered messages."""
        rendered = render(template, fields)
        payload = request_payload(self._identity, template, rendered.version, rendered.messages)
        return CallRequest(
            key=hashlib.sha256(payload).hexdigest(),
            template=template,
            version=rendered.version,
            messages=rendered.messages,
            task_id=str(rendered.fields.get("task_id", "")),
            payload=payload,
            fields=fields,
        )

    def lookup(self, request: CallRequest) -> Completion | None:
        """The cached completion, or None on a miss ("ro": `CacheMissError`)."""
        value = self.cache.get(request.key, request.template, request.task_id)
        return None if value is None else completion_from(value, cached=True)

    def store(self, request: CallRequest, completion: Completion) -> Completion:
        """Record a fresh reply; returns the reply the cache holds (the first writer's)."""
        return self.store_many([(request, completion)])[0]

    def store_many(self, items: Sequence[tuple[CallRequest, Completion]]) -> list[Completion]:
        """Record fresh replies in one transaction (see `store`)."""
        with self._count_lock:
            self.live_calls += len(items)
            self.live_prompt_tokens += sum(c.prompt_tokens for _, c in items)
            self.live_completion_tokens += sum(c.completion_tokens for _, c in items)
        stored = self.cache.put_many(
            [
                (
                    req.key,
                    {
                        "text": c.text,
                        "prompt_tokens": c.prompt_tokens,
                        "completion_tokens": c.completion_tokens,
                        "estimated": c.estimated,
                        "template": req.template,
                        "version": req.version,
                        **({"provenance": c.provenance} if c.provenance else {}),
                    },
                    req.template,
                    req.payload or None,
                )
                for req, c in items
            ]
        )
        out = []
        for (req, fresh), value in zip(items, stored, strict=True):
            if value["text"] != fresh.text:
                logger.info(
                    "another process cached %s for %s first; using its reply", req.template, req.task_id
                )
                out.append(completion_from(value, cached=False))
            else:
                out.append(fresh)
        return out

    # -- the LLM protocol ------------------------------------------------------------------------
    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Replay from the cache, or call the inner LLM once and record its reply."""
        completion = self._complete(template, fields)
        self.replies.add(template, completion)
        return completion

    def _complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        if self.cache.mode == "off":
            return self.inner.complete(template, fields)
        request = self.request(template, fields)
        hit = self.lookup(request)
        if hit is not None:
            return hit
        with self._flight_lock:
            flight = self._flights.get(request.key)
            owner = flight is None
            if flight is None:
                flight = self._flights[request.key] = Future()
        if not owner:
            return flight.result()  # another thread is fetching this very request
        try:
            completion = self.store(request, self.inner.complete(template, fields))
            flight.set_result(completion)
            return completion
        except BaseException as exc:
            flight.set_exception(exc)
            raise
        finally:
            with self._flight_lock:
                self._flights.pop(request.key, None)

    def prefetch(self, calls: Iterable[tuple[str, Mapping[str, Any]]]) -> int:
        """Fill the cache for independent calls, `concurrency` at a time; returns how many were
        fetched. A no-op unless the cache is writable ("ro" replays, "off" has nowhere to keep
        replies: the calls then happen one by one when they are made)."""
        if self.cache.mode != "rw" or not self.cache.writable:
            return 0
        seen: dict[str, CallRequest] = {}
        for template, fields in calls:
            request = self.request(template, fields)
            if request.key not in seen and not self.cache.contains(request.key):
                seen[request.key] = request
        if not seen:
            return 0
        return fetch_all(self, list(seen.values()), concurrency=self.concurrency).calls

    @property
    def live_tokens(self) -> int:
        return self.live_prompt_tokens + self.live_completion_tokens

    def stats(self) -> dict[str, Any]:
        """Cache counters plus the live backend calls and tokens spent through this wrapper."""
        return {**self.cache.stats(), "live_calls": self.live_calls, "live_tokens": self.live_tokens}
