"""A world model's verdict as stored text: the `Outcome`'s fields as JSON, read back through the
bounded JSON reader. Shared by the verdict memos that outlive a process (SQL's
`sql.verdict_memo`, SAT's and SMT's `check_memo`), whose values come from a file any process
may have written: a value that does not decode is a miss, never an exception."""

from __future__ import annotations

import json
import logging
import math

from cm_gym.core import boundedjson
from cm_gym.core.types import Outcome

logger = logging.getLogger(__name__)

_ATOMS = (str, int, float, bool, type(None))


def encode_outcome(outcome: Outcome) -> str | None:
    """JSON of the Outcome's fields; None when a detail is not a plain value (not stored)."""
    details = dict(outcome.details)
    for value in details.values():
        if not isinstance(value, _ATOMS) or (isinstance(value, float) and not math.isfinite(value)):
            return None
    fields = [outcome.score, outcome.solved, outcome.feedback, outcome.status, outcome.reason, details]
    return json.dumps(fields, ensure_ascii=False)


def decode_outcome(data: bytes | str) -> Outcome | None:
    """The Outcome `encode_outcome` wrote, or None for anything else."""
    try:
        fields = boundedjson.loads(data, max_bytes=4 << 20, what="a stored verdict", expect=list)
        score, solved, feedback, status, reason, details = fields
        if not (isinstance(feedback, str) and isinstance(status, str) and isinstance(reason, str)
                and isinstance(details, dict) and isinstance(solved, bool)
                and isinstance(score, (int, float)) and not isinstance(score, bool)):  # fmt: skip
            return None
        return Outcome(score, solved, feedback, status, reason, details)
    except (ValueError, TypeError):
        logger.debug("undecodable stored verdict; checked again")
        return None
