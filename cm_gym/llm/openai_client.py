"""`OpenAICompatibleLLM`: any OpenAI-compatible chat endpoint (vLLM, Ollama, llama.cpp server, a
hosted API, or `cm-gym serve-llm`) through the official `openai` package.

Configuration comes from arguments or the usual environment variables: ``OPENAI_BASE_URL``,
``CM_GYM_MODEL`` (else ``OPENAI_MODEL``) and ``OPENAI_API_KEY`` (default ``"EMPTY"``, which local
servers accept); the client limits (timeout, max_tokens, retries) from arguments, else
``CM_GYM_LLM_*``, else their defaults (`cm_gym.llm.limits`). Transient failures — a connection
that could not be made or was dropped, 408/409/429 and 5xx answers, malformed bodies, an empty
choice list or a missing message content — are retried with exponential backoff (honouring
``Retry-After`` up to the backoff cap); after the last retry, or on any other error status, one
clear `LLMError` is raised. A server that refuses the very first connection is not running: that
is one `LLMUnreachableError` at once, without retries.

A request is never re-sent while an identical one to the same server may still be in flight: a
call whose reply did not arrive within the timeout (the request was sent, the server may still be
computing it) is not retried but fails with one `LLMTimeoutError` line naming the limit and its
flag; and identical requests made at the same time by several threads or tasks of this process
share one HTTP request.

`acomplete_messages` is the asyncio twin of `complete` (same retries, on ``openai.AsyncOpenAI``),
used by `cm_gym.llm.batch` to fill a response cache with many concurrent calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import openai

from cm_gym.llm.base import Completion, estimate_tokens
from cm_gym.llm.errors import LLMError, LLMTimeoutError, LLMUnreachableError
from cm_gym.llm.limits import resolve_limits, timeout_message
from cm_gym.llm.prompts import render

logger = logging.getLogger(__name__)

_RETRY_STATUS = {408, 409, 429}
_UNSENT_TIMEOUTS = frozenset({"ConnectTimeout", "WriteTimeout", "PoolTimeout"})


class _TransientReply(Exception):
    """A 200 answer that carries no usable completion (empty choices, no content)."""


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _refused(exc: BaseException) -> bool:
    """A connection that could not be made at all (not a timeout, not a dropped connection)."""
    return isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError)


def _reply_timed_out(exc: BaseException) -> bool:
    """The request was sent and its reply did not come in time: the server may still be computing
    it (a timeout while connecting, writing or waiting for a pooled connection sent nothing)."""
    if not isinstance(exc, openai.APITimeoutError):
        return False
    # by name: the transport library (httpx, or its successor in newer openai releases) varies
    return type(exc.__cause__).__name__ not in _UNSENT_TIMEOUTS


#: requests in flight in this process, by (server, request body) digest: identical concurrent
#: requests share one HTTP request
_FLIGHTS: dict[str, Future[Completion]] = {}
_FLIGHTS_LOCK = threading.Lock()


def _claim(key: str) -> tuple[Future[Completion], bool]:
    """The flight of `key` and whether the caller owns it (must send the request)."""
    with _FLIGHTS_LOCK:
        flight = _FLIGHTS.get(key)
        if flight is not None:
            return flight, False
        flight = _FLIGHTS[key] = Future()
        return flight, True


def _land(
    key: str, flight: Future[Completion], result: Completion | None, error: BaseException | None
) -> None:
    with _FLIGHTS_LOCK:
        _FLIGHTS.pop(key, None)
    if error is not None:
        flight.set_exception(error)
    else:
        flight.set_result(result)  # type: ignore[arg-type]


def _is_transient(exc: BaseException) -> bool:
    if isinstance(
        exc, (_TransientReply, openai.APIConnectionError, openai.APIResponseValidationError, ValueError)
    ):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return False


class OpenAICompatibleLLM:
    """A frozen LLM behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        backoff_s: float = 0.5,
        backoff_max_s: float = 8.0,
        name: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip(
            "/"
        )
        model = model or os.environ.get("CM_GYM_MODEL") or os.environ.get("OPENAI_MODEL")
        if not model:
            raise LLMError("no model name: pass model=..., or set CM_GYM_MODEL or OPENAI_MODEL")
        self.model = model
        self.name = name or f"openai:{model}"
        limits = resolve_limits(timeout, max_tokens, max_retries)
        self.temperature, self.max_tokens, self.top_p, self.seed = temperature, limits.max_tokens, top_p, seed
        self.max_retries, self.backoff_s, self.backoff_max_s = limits.retries, backoff_s, backoff_max_s
        self.timeout = limits.timeout
        timeout = limits.timeout
        self._sleep = sleep
        self.requests = 0  # HTTP attempts made (retries included)
        self.retries = 0
        self.reached = False  # has the server ever answered? (a first refusal fails at once)
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=self._api_key,
            timeout=timeout,
            max_retries=0,  # retries are ours: counted, logged, testable
        )

    def cache_identity(self) -> dict[str, Any]:
        """Model, sampling parameters and seed: what a cached reply depends on. The base URL is
        left out on purpose: the same model served elsewhere (or nowhere, when a published cache
        is replayed) gives the same replies; a different model must have a different name."""
        return {
            "backend": "openai",
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    def _kwargs(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        return kwargs

    @staticmethod
    def _completion(response: Any, messages: list[dict[str, str]]) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise _TransientReply("the server returned an empty choice list")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        if text is None:
            raise _TransientReply("the server returned a choice without message content")
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        completion_tokens = getattr(usage, "completion_tokens", None)
        if prompt_tokens is None or completion_tokens is None:
            return Completion(
                text,
                estimate_tokens("\n".join(m["content"] for m in messages)),
                estimate_tokens(text),
                estimated=True,
            )
        return Completion(text, int(prompt_tokens), int(completion_tokens))

    def _flight_key(self, kwargs: Mapping[str, Any]) -> str:
        body = json.dumps(kwargs, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{self.base_url}\n{body}".encode()).hexdigest()

    def _retry_delay(self, template: str, attempt: int, exc: Exception) -> float:
        """The pause before retry `attempt` + 1 of a failed request, or one clear `LLMError` when
        the failure is not transient, the reply timed out (never re-sent), the server was never
        reached, or retries are exhausted."""
        if _reply_timed_out(exc):
            raise LLMTimeoutError(timeout_message(self.timeout, self.base_url, template)) from exc
        if _refused(exc) and not self.reached:
            raise LLMUnreachableError(
                f"cannot connect to {self.base_url} ({exc.__cause__ or exc}): start the server, fix "
                "OPENAI_BASE_URL, or replay a filled response cache with --llm-cache-mode ro"
            ) from exc
        if not _is_transient(exc):
            raise LLMError(f"{self.base_url} refused the {template} request: {exc}") from exc
        if attempt >= self.max_retries:
            raise LLMError(
                f"{template} request to {self.base_url} (model {self.model}) failed after "
                f"{self.max_retries + 1} attempts: {type(exc).__name__}: {exc}"
            ) from exc
        delay = min(self.backoff_max_s, self.backoff_s * (2**attempt))
        hinted = _retry_after(exc)
        if hinted is not None:
            delay = min(self.backoff_max_s, max(delay, hinted))
        self.retries += 1
        logger.warning(
            "%s request to %s failed (%s: %s); retry %d/%d in %.2fs",
            template,
            self.base_url,
            type(exc).__name__,
            exc,
            attempt + 1,
            self.max_retries,
            delay,
        )
        return delay

    def complete(self, template: str, fields: Mapping[str, Any]) -> Completion:
        """Render `template`, send it, retry transient failures, return text and token usage."""
        return self.complete_messages(render(template, fields).messages, template)

    def complete_messages(self, messages: list[dict[str, str]], template: str = "request") -> Completion:
        """Send already-rendered chat messages (retries as in `complete`); an identical request
        already in flight from this process is waited for, not sent again."""
        kwargs = self._kwargs(messages)
        key = self._flight_key(kwargs)
        flight, owner = _claim(key)
        if not owner:
            return flight.result()
        result, error = None, None
        try:
            result = self._send(kwargs, messages, template)
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            _land(key, flight, result, error)

    def _send(self, kwargs: dict[str, Any], messages: list[dict[str, str]], template: str) -> Completion:
        for attempt in range(self.max_retries + 1):
            try:
                self.requests += 1
                response = self._client.chat.completions.create(**kwargs)
                completion = self._completion(response, messages)
                self.reached = True
                return completion
            except Exception as exc:  # noqa: BLE001 - classified by _retry_delay; never leaks raw
                if not _refused(exc):
                    self.reached = True
                self._sleep(self._retry_delay(template, attempt, exc))
        raise AssertionError("unreachable")  # pragma: no cover

    def async_client(self) -> openai.AsyncOpenAI:
        """A fresh ``openai.AsyncOpenAI`` for one event loop (close it when the loop is done)."""
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self._api_key, timeout=self.timeout, max_retries=0
        )

    async def acomplete_messages(
        self, client: openai.AsyncOpenAI, messages: list[dict[str, str]], template: str = "request"
    ) -> Completion:
        """`complete_messages` on an async client: same retries, ``Retry-After``, errors and
        sharing of identical requests in flight."""
        kwargs = self._kwargs(messages)
        key = self._flight_key(kwargs)
        flight, owner = _claim(key)
        if not owner:
            return await asyncio.wrap_future(flight)
        result, error = None, None
        try:
            for attempt in range(self.max_retries + 1):
                try:
                    self.requests += 1
                    response = await client.chat.completions.create(**kwargs)
                    result = self._completion(response, messages)
                    self.reached = True
                    return result
                except Exception as exc:  # noqa: BLE001 - classified by _retry_delay; never leaks raw
                    if not _refused(exc):
                        self.reached = True
                    await asyncio.sleep(self._retry_delay(template, attempt, exc))
            raise AssertionError("unreachable")  # pragma: no cover
        except BaseException as exc:
            error = exc
            raise
        finally:
            _land(key, flight, result, error)
