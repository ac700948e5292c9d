"""Client limits of a real LLM endpoint, where users set them: a flag, a `CM_GYM_LLM_*`
environment variable, or a keyword (``gym.make(..., llm_timeout=900)``), in that order of
precedence over the defaults.

=============  ======================  ==========================  =======  ======================
limit          flag                    variable                    default  what it bounds
=============  ======================  ==========================  =======  ======================
timeout        ``--llm-timeout S``     ``CM_GYM_LLM_TIMEOUT``      60 s     one call's wait
max_tokens     ``--llm-max-tokens N``  ``CM_GYM_LLM_MAX_TOKENS``   1024     one reply's length
retries        ``--llm-retries N``     ``CM_GYM_LLM_RETRIES``      4        re-sends of a failure
concurrency    ``--llm-concurrency N`` ``CM_GYM_LLM_CONCURRENCY``  8        calls in flight
=============  ======================  ==========================  =======  ======================

``max_tokens`` changes replies, so it is part of every cache key; the others never change a reply
and are not. The timeout must exceed one call's latency on the server (a CPU-served model can
take minutes per call): a call that times out is never re-sent (the server may still be computing
it), it fails with one line naming the limit and the flag.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cm_gym.llm.errors import LLMError

#: limit -> (flag, environment variable, default)
LIMITS: Mapping[str, tuple[str, str, float | int]] = {
    "timeout": ("--llm-timeout", "CM_GYM_LLM_TIMEOUT", 60.0),
    "max_tokens": ("--llm-max-tokens", "CM_GYM_LLM_MAX_TOKENS", 1024),
    "retries": ("--llm-retries", "CM_GYM_LLM_RETRIES", 4),
    "concurrency": ("--llm-concurrency", "CM_GYM_LLM_CONCURRENCY", 8),
}
_LOW = {"timeout": 0.0, "max_tokens": 1, "retries": 0, "concurrency": 1}


@dataclass(frozen=True)
class ClientLimits:
    """The effective limits of one client (see the module docstring)."""

    timeout: float = 60.0
    max_tokens: int = 1024
    retries: int = 4
    concurrency: int = 8


def check_limit(name: str, value: object, where: str | None = None) -> float | int:
    """`value` validated for limit `name` (a positive timeout, max_tokens and concurrency >= 1,
    retries >= 0); one `LLMError` naming `where` (the flag by default) otherwise."""
    flag = LIMITS[name][0]
    try:
        number = float(value) if name == "timeout" else int(str(value).strip())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LLMError(f"{where or flag} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise LLMError(f"{where or flag} must be a finite number, got {value!r}")
    low = _LOW[name]
    if (name == "timeout" and number <= low) or number < low:
        bound = "> 0" if name == "timeout" else f">= {low}"
        raise LLMError(f"{where or flag} must be {bound}, got {value!r}")
    return number


def limit(name: str, given: object = None, environ: Mapping[str, str] | None = None) -> float | int:
    """One limit: `given` if not None, else its environment variable, else the default."""
    flag, variable, default = LIMITS[name]
    if given is not None:
        return check_limit(name, given, flag)
    env = os.environ if environ is None else environ
    raw = env.get(variable, "").strip()
    return check_limit(name, raw, variable) if raw else default


def resolve_limits(
    timeout: float | None = None,
    max_tokens: int | None = None,
    retries: int | None = None,
    concurrency: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> ClientLimits:
    """The effective `ClientLimits`: given values, else `CM_GYM_LLM_*`, else the defaults."""
    return ClientLimits(
        float(limit("timeout", timeout, environ)),
        int(limit("max_tokens", max_tokens, environ)),
        int(limit("retries", retries, environ)),
        int(limit("concurrency", concurrency, environ)),
    )


def timeout_message(seconds: float, url: str, template: str) -> str:
    """The one line a timed-out call ends with."""
    return (
        f"{template} request to {url} timed out after {seconds:g} s (the client timeout: "
        f"--llm-timeout / CM_GYM_LLM_TIMEOUT); it was not re-sent, since the server may still be "
        "computing it: raise the timeout above one call's latency on this server"
    )
