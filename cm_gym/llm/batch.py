"""Concurrent cache filling: many independent LLM calls at once, with bounded concurrency.

Two pieces, used by `cm-gym tabulate`, by construction's prefetch and by evaluation's prefetch:

* `RecordingLLM` answers from a `CachedLLM`'s cache and raises `PendingCall` on a miss, so any code
  path (the env, the agent) can be *run* to discover which calls it needs, without making them.
* `fetch_all` makes those calls concurrently — ``asyncio`` on ``openai.AsyncOpenAI`` when the
  backend is an OpenAI-compatible endpoint, a thread pool otherwise — honouring ``Retry-After``,
  at most `concurrency` in flight, and stores the replies as they arrive (in small batches, one
  transaction each), so a killed run loses at most the last fraction of a second and resumes.

Results never depend on the concurrency: every reply is stored under its key and the callers
replay from the cache in their own deterministic order.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from cm_gym.llm.base import Completion
from cm_gym.llm.call_request import CallRequest
from cm_gym.llm.errors import LLMError

logger = logging.getLogger(__name__)

T = TypeVar("T")
FLUSH_EVERY = 32  # replies per cache transaction at most
FLUSH_SECONDS = 0.25  # and at least this often while replies arrive


class CacheBackedLLM(Protocol):
    """What this module needs of a `cm_gym.llm.cached.CachedLLM` (which calls it: `prefetch`), so
    that it does not import that module: the backend (``inner``), the cache's requests, look-ups
    and stores."""

    name: str
    inner: Any

    def cache_identity(self) -> dict[str, Any]: ...

    def request(self, template: str, fields: Mapping[str, Any]) -> CallRequest: ...

    def lookup(self, request: CallRequest) -> Completion | None: ...

    def store_many(self, items: Sequence[tuple[CallRequest, Completion]]) -> list[Completion]: ...


class PendingCall(BaseException):  # noqa: N818 - a control-flow signal, not an error
    """Raised by `RecordingLLM` on a cache miss. A BaseException, like `GeneratorExit`, so that
    code which falls back on ``except Exception`` (an LLM failure during construction) lets it
    through: the run is aborted, the call fetched, and the run replayed."""

    def __init__(self, request: CallRequest) -> None:
        super().__init__(f"{request.template} for task {request.task_id} is not cached yet")
        self.request = request


class RecordingLLM:
    """An `LLM` that replays `cached` and raises `PendingCall` on a miss (see the module docstring).
    ``hits`` counts replayed calls."""

    def __init__(self, cached: CacheBackedLLM) -> None:
        self.cached = cached
        self.name = cached.name
        self.hits = 0

    def cache_identity(self) -> dict[str, Any]:
        return self.cached.cache_identity()

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        request = self.cached.request(template, fields)
        hit = self.cached.lookup(request)
        if hit is None:
            raise PendingCall(request)
        self.hits += 1
        return hit


class CallProgress:
    """A tqdm bar (or None: silent) counting calls, its postfix the running token total of every
    fetch it has seen (a tabulation makes many)."""

    def __init__(self, bar: Any = None) -> None:
        self.bar, self.calls, self.tokens = bar, 0, 0

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.tokens += completion.total_tokens
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(tokens=f"{self.tokens:,}", refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class FetchStats:
    """What one or more `fetch_all` runs did."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: FetchStats) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.seconds += other.seconds


def fetch_all(
    llm: CacheBackedLLM,
    requests: Sequence[CallRequest],
    *,
    concurrency: int = 8,
    progress: Any = None,
) -> FetchStats:
    """Call the backend of `llm` for every request (de-duplicated by key), at most `concurrency` at
    a time, and store each reply in `llm`'s cache. `progress` is an optional `CallProgress` (or a
    bare tqdm bar) advanced per call. The first failure that survives the backend's own retries
    stops the run with one `LLMError`; replies stored before it stay stored."""
    unique = list({r.key: r for r in requests}.values())
    stats = FetchStats()
    if not unique:
        return stats
    started = time.perf_counter()
    writer = _Writer(
        llm,
        stats,
        progress if progress is None or isinstance(progress, CallProgress) else CallProgress(progress),
    )
    inner = llm.inner
    try:
        if callable(getattr(inner, "acomplete_messages", None)) and callable(
            getattr(inner, "async_client", None)
        ):
            _run(_fetch_async(inner, unique, max(1, concurrency), writer))
        else:
            _fetch_threads(inner, unique, max(1, concurrency), writer)
    finally:
        writer.flush()  # what arrived before a failure or a kill is kept
    stats.seconds = time.perf_counter() - started
    return stats


class _Writer:
    """Buffers fresh replies and stores them a few at a time (one transaction per flush)."""

    def __init__(self, llm: CacheBackedLLM, stats: FetchStats, progress: CallProgress | None) -> None:
        self.llm, self.stats, self.progress = llm, stats, progress
        self.buffer: list[tuple[CallRequest, Completion]] = []
        self.last_flush = time.perf_counter()
        self.lock = threading.Lock()

    def add(self, request: CallRequest, completion: Completion) -> None:
        with self.lock:
            self.buffer.append((request, completion))
            self.stats.calls += 1
            self.stats.prompt_tokens += completion.prompt_tokens
            self.stats.completion_tokens += completion.completion_tokens
            if self.progress is not None:
                self.progress.add(completion)
            due = len(self.buffer) >= FLUSH_EVERY or time.perf_counter() - self.last_flush >= FLUSH_SECONDS
        if due:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            items, self.buffer = self.buffer, []
            self.last_flush = time.perf_counter()
            if items:
                self.llm.store_many(items)


def _run(coro: Awaitable[T]) -> T:
    """`asyncio.run`, also from a thread that already runs an event loop (a notebook)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="cm-gym-fetch")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _fetch_async(inner: Any, requests: list[CallRequest], concurrency: int, writer: _Writer) -> None:
    queue: asyncio.Queue[CallRequest] = asyncio.Queue()
    for request in requests:
        queue.put_nowait(request)
    client = inner.async_client()
    try:

        async def worker() -> None:
            while True:
                try:
                    request = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                completion = await inner.acomplete_messages(client, request.messages, request.template)
                writer.add(request, completion)

        workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(requests)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    finally:
        await client.close()


def _fetch_threads(inner: Any, requests: list[CallRequest], concurrency: int, writer: _Writer) -> None:
    """Backends without an async client (the simulated LLM, your own): a thread pool."""
    stop = threading.Event()

    def one(request: CallRequest) -> None:
        if stop.is_set():
            return
        try:
            writer.add(request, inner.complete(request.template, request.fields))
        except BaseException:
            stop.set()
            raise

    with ThreadPoolExecutor(
        max_workers=min(concurrency, len(requests)), thread_name_prefix="cm-gym-llm"
    ) as pool:
        futures = [pool.submit(one, r) for r in requests]
        error: BaseException | None = None
        for future in futures:
            exc = future.exception()
            if exc is not None and error is None:
                error = exc
    if error is not None:
        if isinstance(error, LLMError):
            raise error
        raise LLMError(
            f"LLM backend failed while filling the cache: {type(error).__name__}: {error}"
        ) from error
