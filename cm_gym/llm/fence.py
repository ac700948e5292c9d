"""Actions in fenced code blocks: the form every domain's `Domain.parse_action` extracts, and the
form the simulated LLM answers in."""

from __future__ import annotations


def fenced(action: str) -> str:
    """An action in a fenced code block, the form `Domain.parse_action` extracts. The fence is
    longer than any backtick run inside the action (CommonMark's rule), so an action that itself
    holds a fenced block (a comment quoting Markdown) comes back whole."""
    if "```" not in action:  # no run of 3+ backticks: the plain fence (skips the scan)
        return f"```\n{action}\n```"
    longest, run = 0, 0
    for ch in action:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1) if longest >= 3 else "```"
    return f"{fence}\n{action}\n{fence}"
