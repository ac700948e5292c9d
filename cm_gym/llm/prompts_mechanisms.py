"""Prompt templates of the memory-mechanism baselines (paper Table 7, D.5), in the Table-7 style.

Kept apart from `prompts.py` (which turns these specs into `PromptTemplate`s and lists them in
`CHAT_TEMPLATES`), so that module stays about the CounterMem templates. Every template is versioned
like the others: the version is part of every response-cache key, so editing a text means bumping
its version. Reply parsers (with their fallbacks) are in `llm/parsers_mechanisms.py`; the simulated
LLM's answers in `llm/simulated_mechanisms.py`.

Worked examples. A lesson, reflection, skill or strategy may carry a worked example of the change
it describes, written as ``BEFORE:`` / ``AFTER:`` fenced blocks. A real LLM reads it as an example;
the simulated LLM can act only on guidance that carries one (see `simulated_mechanisms.py`).
"""

from __future__ import annotations

from cm_gym.llm.base import (
    EXPEL_INSIGHT,
    GENERATIVE_AGENTS_IMPORTANCE,
    GENERATIVE_AGENTS_REFLECT,
    MATTS_SELF_CONTRAST,
    MEMGPT_ARCHIVE,
    MEMGPT_SEARCH,
    REASONINGBANK_EXTRACT,
    REASONINGBANK_VERIFIED,
    REVISE_WITH_GUIDANCE,
    VOYAGER_SKILL,
)

_EXAMPLE_HELP = (
    "If a concrete change is the lesson, you may add a worked example as BEFORE: and AFTER: fenced blocks."
)

_META = "<task_id>{task_id}</task_id> <agent>{agent}</agent> <decision>{decision}</decision>"

#: (name, version, system, user) of every mechanism template; `prompts.py` builds them.
MECHANISM_TEMPLATE_SPECS: tuple[tuple[str, str, str, str], ...] = (
    (
        REVISE_WITH_GUIDANCE,
        "1",
        "You are an agent revising a draft action (a <action_kind>{action_kind}</action_kind>) with "
        "guidance that a memory mechanism (<mechanism>{mechanism}</mechanism>) retrieved from earlier "
        "tasks. The guidance was not checked for this task. Use it only where it fits this task; "
        "otherwise return the draft unchanged.",
        _META + "\n\n<state_text>\n{state_text}\n</state_text>\n\n"
        "Your draft, written before seeing memory:\n<draft>\n{draft}\n</draft>\n\n"
        "Guidance from memory:\n<guidance>\n{guidance}\n</guidance>\n\n"
        "Revise the draft where the guidance applies to this task, else keep it exactly as it is.\n"
        "<action_format>{action_format}</action_format>",
    ),
    (
        EXPEL_INSIGHT,
        "1",
        "You extract transferable insights from an agent's experience (ExpeL). Actions are "
        "<action_kind>{action_kind}</action_kind>.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "A failed attempt:\n<failed_action>\n{failed_action}\n</failed_action>\n"
        "The checker's feedback on it:\n<feedback>\n{feedback}\n</feedback>\n\n"
        "A later attempt on the same task that succeeded:\n"
        "<successful_action>\n{successful_action}\n</successful_action>\n\n"
        "Compare the two and extract one transferable lesson for future, different tasks. "
        + _EXAMPLE_HELP
        + "\nReply with one line: INSIGHT: <the lesson>",
    ),
    (
        GENERATIVE_AGENTS_IMPORTANCE,
        "1",
        "You rate how important a memory is for an agent's future work (Generative Agents).",
        "<task_id>{task_id}</task_id>\n\n<observation>\n{observation}\n</observation>\n\n"
        "On a scale of 1 to 10, where 1 is routine (a task solved at once) and 10 is highly "
        "significant (a mistake and how it was corrected), rate this memory.\n"
        "Reply with one line: IMPORTANCE: <1-10>",
    ),
    (
        GENERATIVE_AGENTS_REFLECT,
        "1",
        "You write generalized reflections over an agent's recent memories (Generative Agents).",
        "<task_id>{task_id}</task_id>\n\nRecent memories:\n<memories>\n{memories}\n</memories>\n\n"
        "What is the most salient high-level insight these memories support? Write one generalized "
        "reflection for later retrieval. "
        + _EXAMPLE_HELP
        + "\nReply with one line: REFLECTION: <the reflection>",
    ),
    (
        VOYAGER_SKILL,
        "1",
        "You add a verified solution to a skill library (Voyager). Actions are "
        "<action_kind>{action_kind}</action_kind>.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "How the task went (the last action passed the checker):\n<trajectory>\n{trajectory}\n</trajectory>\n\n"
        "Store this solution as a reusable procedure. "
        + _EXAMPLE_HELP
        + "\nReply with exactly these lines:\nNAME: <a short name>\nDESCRIPTION: <when this "
        "procedure applies>\nSTEPS: <numbered steps, on one line>",
    ),
    (
        MEMGPT_ARCHIVE,
        "1",
        "You manage your own long-term memory (MemGPT): you may insert one entry into archival "
        "storage after each task. Actions are <action_kind>{action_kind}</action_kind>.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "<trajectory>\n{trajectory}\n</trajectory>\n\n"
        "Write the archival_memory_insert entry that will help you most on later tasks. "
        + _EXAMPLE_HELP
        + "\nReply with one line: ENTRY: <the entry>",
    ),
    (
        MEMGPT_SEARCH,
        "1",
        "You manage your own working context (MemGPT). Your working context holds a few pages "
        "from archival storage; you may search archival storage to page new entries in.",
        "<task_id>{task_id}</task_id>\n\n<state_text>\n{state_text}\n</state_text>\n\n"
        "Your working context:\n<working_context>\n{working_context}\n</working_context>\n\n"
        "Call archival_memory_search if you need other entries, else keep the context.\n"
        "Reply with one line: SEARCH: <query>   or   SEARCH: none",
    ),
    (
        REASONINGBANK_EXTRACT,
        "1",
        "You distil reasoning strategies from an agent's trajectory (ReasoningBank). Actions are "
        "<action_kind>{action_kind}</action_kind>. No reference answer is available: judge the "
        "outcome yourself from the trajectory.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "<trajectory>\n{trajectory}\n</trajectory>\n\n"
        "First judge whether the trajectory succeeded. Then write one strategy: from a success, what "
        "made it work; from a failure, what to avoid. Keep it general. "
        + _EXAMPLE_HELP
        + "\nReply with exactly these lines:\nOUTCOME: <success|failure>\nTITLE: <title>\n"
        "DESCRIPTION: <one sentence>\nCONTENT: <the strategy>",
    ),
    (
        MATTS_SELF_CONTRAST,
        "1",
        "You contrast several attempts at the same task to extract strategy-level guidance "
        "(ReasoningBank with memory-aware test-time scaling). Actions are "
        "<action_kind>{action_kind}</action_kind>.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "Independent attempts at this task:\n<trajectories>\n{trajectories}\n</trajectories>\n\n"
        "Contrast the attempts: what do the successful ones do that the failed ones do not? Write "
        "one strategy. "
        + _EXAMPLE_HELP
        + "\nReply with exactly these lines:\nTITLE: <title>\nDESCRIPTION: <one sentence>\n"
        "CONTENT: <the strategy>",
    ),
    (
        REASONINGBANK_VERIFIED,
        "1",
        "You distil reasoning strategies from an agent's trajectory (ReasoningBank), given the "
        "checker's verified score of every attempt. Actions are <action_kind>{action_kind}</action_kind>.",
        "<task_id>{task_id}</task_id>\n\n<question>\n{question}\n</question>\n\n"
        "The trajectory, with each attempt's checked score:\n<trajectory>\n{trajectory}\n</trajectory>\n\n"
        "Using the checked scores, write one strategy: from an improvement, what made it better; "
        "from a failure, what to avoid. Keep it general. "
        + _EXAMPLE_HELP
        + "\nReply with exactly these lines:\nOUTCOME: <success|failure>\nTITLE: <title>\n"
        "DESCRIPTION: <one sentence>\nCONTENT: <the strategy>",
    ),
)

#: Prompt-field limits (characters) of the mechanism templates' own fields.
MECHANISM_FIELD_LIMITS: dict[str, int] = {
    "guidance": 3000,
    "trajectory": 3000,
    "trajectories": 3 * 3000,
    "memories": 3000,
    "observation": 3000,
    "working_context": 3000,
    "failed_action": 2000,
    "successful_action": 2000,
    "mechanism": 60,
}
