"""A corpus of reply shapes, written from what vLLM-served chat models (gpt-oss, Qwen, Llama, …)
emit around an action: prose around fences, replies cut at ``max_tokens``, repeated blocks, a
first attempt corrected by a second, ``<think>`` sections, chatter in another language, Windows
line ends, fences inside list items. Each shape wraps an action of a domain; `parse_action` must
give the action back (`EXPECTED`).
"""

from __future__ import annotations

from collections.abc import Callable

#: (action, fence tag, a wrong action of the same domain, the action's name in prose) -> reply
Shape = Callable[[str, str, str, str], str]

SHAPES: dict[str, Shape] = {
    "fenced": lambda a, t, w, n: f"```{t}\n{a}\n```",
    "untagged": lambda a, t, w, n: f"```\n{a}\n```",
    "prose-around": lambda a, t, w, n: (
        f"Here is the {n}:\n\n```{t}\n{a}\n```\n\nThis should work because it "
        "checks every case. Let me know if you need changes!"
    ),
    "empty-block-first": lambda a, t, w, n: f"```\n\n```{t}\n{a}\n```",
    "cut-at-max-tokens": lambda a, t, w, n: f"Sure! The {n} is:\n```{t}\n{a}",
    "repeated": lambda a, t, w, n: (
        f"```{t}\n{a}\n```\n\nTo be sure, the final answer again:\n\n```{t}\n{a}\n```"
    ),
    "corrected": lambda a, t, w, n: (
        f"First try:\n```{t}\n{w}\n```\nWait, that is wrong. Corrected:\n```{t}\n{a}\n```"
    ),
    "think-first": lambda a, t, w, n: (
        f"<think>\nThe user wants a {n}. Maybe:\n```{t}\n{w}\n```\nNo.\n</think>\n\n```{t}\n{a}\n```"
    ),
    "bare-closing-think": lambda a, t, w, n: (
        f"I should check the bounds.\n```{t}\n{w}\n```\n</think>\n```{t}\n{a}\n```"
    ),
    "wrong-language-chatter": lambda a, t, w, n: (
        f"```{t}\n{a}\n```\n\nTo try it yourself:\n\n```bash\necho run it\n```"
    ),
    "fence-after-text": lambda a, t, w, n: f"Here it is: ```{t}\n{a}\n```",
    "close-on-content-line": lambda a, t, w, n: f"```{t}\n{a}```\nDone.",
    "tilde-fence": lambda a, t, w, n: f"~~~{t}\n{a}\n~~~",
    "crlf": lambda a, t, w, n: f"Answer:\r\n```{t}\r\n{a}\r\n```\r\n".replace("\n", "\r\n").replace(
        "\r\r\n", "\r\n"
    ),
    "list-item-fence": lambda a, t, w, n: (
        "1. The fixed version:\n\n   ```"
        + t
        + "\n"
        + "\n".join("   " + line if line else "" for line in a.split("\n"))
        + "\n   ```\n2. Nothing else changes."
    ),
    "bare-in-prose": lambda a, t, w, n: (
        f"The {n} you need is below.\n\n{a}\n\nThis returns what the task asks for."
    ),
    "action-label": lambda a, t, w, n: f"ACTION:\n{a}",
}

#: the shapes every domain's prose recogniser must read (the rest are fence rules, shared)
PROSE_SHAPES = ("bare-in-prose", "action-label")
