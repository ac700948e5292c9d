"""The action inside a real model's reply: one linear-time extraction core every domain configures.

Real models (behind vLLM, Ollama, a hosted API) wrap the action in prose and fences, cut off at
``max_tokens``, repeat themselves, answer in another language and think aloud. `extract` applies
the same rules to every domain, in order:

1. ``<think>`` / ``<reasoning>`` sections are set aside (a reply cut inside one has no answer);
2. the **last complete** fenced block in the domain's language: tagged with one of
   `ReplyFormat.languages`, or untagged with content the domain's recogniser reads;
3. else the **first** fenced block of any language with content (untagged first);
4. else the text after an ``ACTION:`` label, when the domain recognises an action in it;
5. else the statement the domain recognises inside the prose (`ReplyFormat.recognise`: a
   ``SELECT``, an s-expression set, a ``def`` block, …); a domain without a recogniser takes the
   whole visible reply;
6. else no action: `Extraction.action` is None and `Extraction.problem` says why, in one line.

An unclosed fence (a reply cut at ``max_tokens``) is closed at the end of the reply. Fences follow
what models write rather than strict CommonMark: a fence may open after text on its line ("Here it
is: ```sql"), close at the end of a content line ("SELECT 1;```"), and a tagged fence line inside an
open block of the same fence length closes it and opens the next ("```\\n\\n```sql" is an empty block
then a SQL block). Everything here scans each line a bounded number of times: no regex that can
backtrack, so a hostile reply costs no more than a long one (`tests/llm/test_fuzz.py`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

#: Reasoning sections some models emit before their answer (tags without the brackets).
THINK_TAGS: tuple[str, ...] = ("think", "thinking", "reasoning")
_INFO_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+-.#")
_LABELS: tuple[str, ...] = ("ACTION:", "Action:", "action:")
_WORD = re.compile(r"\w*")

#: What a recogniser is: the domain's statement found inside prose, or None.
Recogniser = Callable[[str], "str | None"]


@dataclass(frozen=True)
class ReplyFormat:
    """How a domain's action looks in a reply: the fence tags of its language (lower-case), the
    recogniser of a bare statement inside prose, and what to call the action in a parse failure."""

    languages: tuple[str, ...] = ()
    recognise: Recogniser | None = None
    what: str = "action"


@dataclass(frozen=True)
class Block:
    """One fenced block: its tag (the info string's first word, lower-case; "" untagged), its
    body, and whether a closing fence ended it (False: closed at the end of the reply)."""

    tag: str
    body: str
    closed: bool


@dataclass(frozen=True)
class Extraction:
    """Where the action came from: ``source`` is "fence", "fence-other", "label", "prose",
    "whole" (a domain without a recogniser) or "none"; ``problem`` is the one-line reason when
    nothing was found; ``cut`` is True when the action's fence was never closed."""

    action: str | None
    source: str
    problem: str = ""
    cut: bool = False

    @property
    def found(self) -> bool:
        return self.action is not None


# -- reasoning sections ----------------------------------------------------------------------------
def split_thinking(text: str) -> tuple[str, bool]:
    """``(visible text, cut_while_thinking)``: `text` without its reasoning sections. An opening
    tag that never closes hides the rest (the reply was cut while thinking); a closing tag before
    any opening one (servers that put the opening tag in the prompt) hides what precedes it."""
    out: list[str] = []
    visible_from, open_tag, seen = 0, "", False
    i = text.find("<")
    while i != -1:
        found = _tag_at(text, i)
        if found is None:
            i = text.find("<", i + 1)
            continue
        tag, closing, end = found
        if not open_tag and not closing:
            out.append(text[visible_from:i])
            open_tag = tag
        elif not open_tag and closing and not seen:
            out, visible_from = [], end  # reasoning before a bare closing tag
        elif not open_tag and closing:
            out.append(text[visible_from:i])  # a stray closing tag later on: dropped
            visible_from = end
        elif open_tag == tag and closing:
            open_tag, visible_from = "", end
        seen = True
        i = text.find("<", end)
    if open_tag:
        return "".join(out), True
    out.append(text[visible_from:])
    return "".join(out), False


def _tag_at(text: str, i: int) -> tuple[str, bool, int] | None:
    """The reasoning tag (any case) starting at `i`: (tag, is_closing, end), or None."""
    closing = text.startswith("</", i)
    start = i + (2 if closing else 1)
    for tag in THINK_TAGS:
        if text[start : start + len(tag)].lower() == tag and text.startswith(">", start + len(tag)):
            return tag, closing, start + len(tag) + 1
    return None


# -- fenced blocks ---------------------------------------------------------------------------------
def _run(s: str, char: str) -> int:
    """Length of the run of `char` at the start of `s`."""
    n = 0
    while n < len(s) and s[n] == char:
        n += 1
    return n


def _info_word(rest: str) -> str | None:
    """The tag of an opening fence's info string, "" for none, None when `rest` is not an info
    string (it holds backticks, or is prose after the fence)."""
    rest = rest.strip()
    if not rest:
        return ""
    if "`" in rest:
        return None
    word = rest.split()[0]
    if not set(word) <= _INFO_CHARS or len(rest.split()) > 3:
        return None
    return word.lower().lstrip(".")


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of `text`, in order (see the module docstring for the fence rules)."""
    blocks: list[Block] = []
    lines = text.split("\n")
    fence_char, fence_len, tag, indent = "", 0, "", 0
    body: list[str] = []
    for line in lines:
        stripped = line.strip()
        if fence_len:  # inside a block
            if indent:  # an indented fence (a list item): its content is indented as much
                line = line[min(indent, len(line) - len(line.lstrip(" "))) :]
            n = _run(stripped, fence_char)
            if n >= fence_len:
                info = _info_word(stripped[n:])
                if info == "":  # a closing fence
                    blocks.append(Block(tag, "\n".join(body), True))
                    fence_len, body = 0, []
                    continue
                if info is not None and n == fence_len:  # a tagged fence: the next block opens
                    blocks.append(Block(tag, "\n".join(body), True))
                    tag, body = info, []
                    continue
            if fence_char == "`" and stripped.endswith("`" * fence_len) and len(stripped) > fence_len:
                content = line.rstrip()[:-fence_len]
                body.append(content)
                blocks.append(Block(tag, "\n".join(body), True))
                fence_len, body = 0, []
                continue
            body.append(line)
            continue
        at = line.find("```")
        tilde = stripped.startswith("~~~")
        if at == -1 and not tilde:
            continue
        lead = len(line) - len(line.lstrip(" "))
        if tilde:
            n = _run(stripped, "~")
            info = _info_word(stripped[n:])
            if info is not None:
                fence_char, fence_len, tag, body, indent = "~", n, info, [], lead
            continue
        head = line[at:]
        n = _run(head, "`")
        rest = head[n:]
        info = _info_word(rest)
        if info is not None:
            fence_char, fence_len, tag, body, indent = "`", n, info, [], lead if at == lead else 0
            continue
        one = _one_line_block(rest, n)
        if one is not None:
            blocks.append(one)
    if fence_len:
        blocks.append(Block(tag, "\n".join(body), False))
    return blocks


def _one_line_block(rest: str, n: int) -> Block | None:
    """A whole block on one line, ``` ```sql SELECT 1``` ```: the text up to the closing run."""
    close = rest.find("`" * n)
    if close <= 0:
        return None
    inner = rest[:close].strip()
    first, _, more = inner.partition(" ")
    if not more and first.isalpha() and len(first) <= 12:
        return None  # "wrap it in ```sql``` fences": a tag in prose, not a block
    if more and first.isalpha() and first.islower() and len(first) <= 12:
        return Block(first, more.strip(), True)
    return Block("", inner, True)


# -- the rules -------------------------------------------------------------------------------------
def pick_block(
    blocks: list[Block], languages: tuple[str, ...], recognise: Recogniser | None = None
) -> Block | None:
    """The last complete block in the domain's language — tagged with one of `languages`, or
    untagged with content `recognise` reads — else the last one of them, cut off; else the first
    block with content, untagged before tagged."""

    def ours(b: Block) -> bool:
        if b.tag:
            return b.tag in languages
        return recognise is not None and recognise(b.body) is not None

    filled = [b for b in blocks if b.body.strip()]
    if len(filled) <= 1:  # one block with content: nothing to choose (no recogniser run)
        return filled[0] if filled else None
    mine = [b for b in filled if ours(b)]
    if mine:
        complete = [b for b in mine if b.closed]
        return complete[-1] if complete else mine[-1]
    untagged = [b for b in filled if not b.tag]
    return (untagged or filled or [None])[0]


def _after_label(text: str) -> str | None:
    for label in _LABELS:
        at = text.find(label)
        if at != -1:
            return text[at + len(label) :]
    return None


def extract(text: str, fmt: ReplyFormat) -> Extraction:
    """The action in a reply under `fmt` (see the module docstring for the rules)."""
    text = text.replace("\r\n", "\n")
    visible, cut_thinking = split_thinking(text)
    block = pick_block(fenced_blocks(visible), fmt.languages, fmt.recognise)
    if block is not None:
        source = "fence" if block.tag in fmt.languages or not block.tag else "fence-other"
        return Extraction(block.body.strip("\n").strip(), source, cut=not block.closed)
    labelled = _after_label(visible)
    if labelled is not None:
        found = fmt.recognise(labelled) if fmt.recognise is not None else labelled.strip()
        if found:
            return Extraction(found.strip(), "label")
    if fmt.recognise is None:
        whole = visible.strip()
        if whole:
            return Extraction(whole, "whole")
    else:
        found = fmt.recognise(visible)
        if found and found.strip():
            return Extraction(found.strip(), "prose")
    return Extraction(None, "none", problem(text, visible, cut_thinking, fmt))


def problem(text: str, visible: str, cut_thinking: bool, fmt: ReplyFormat) -> str:
    """One line saying why a reply holds no action."""
    if not text.strip():
        return "the reply is empty"
    if cut_thinking and not visible.strip():
        return "the reply was cut off inside its reasoning section (raise --llm-max-tokens)"
    if not visible.strip():
        return "the reply holds only a reasoning section"
    tags = ", ".join(f"```{t}" for t in fmt.languages[:2]) or "```"
    return f"the reply holds no {fmt.what} (no {tags} fenced block, no {fmt.what} in its text)"


def visible_text(text: str) -> str:
    """The reply without its reasoning sections, stripped (what a failed parse passes on)."""
    return split_thinking(text.replace("\r\n", "\n"))[0].strip()


# -- helpers for recognisers -----------------------------------------------------------------------
def word_at(text: str, i: int) -> str:
    """The identifier-like word (letters, digits, ``_``) starting at `i`."""
    found = _WORD.match(text, i)
    return found.group() if found else ""


def starts_sentence(text: str, i: int = 0, keywords: frozenset[str] = frozenset()) -> bool:
    """Whether an English sentence starts at `i`: a capitalised word (not all capitals, not one of
    `keywords`, compared lower-case) and then a lower-case word ("This query", "Here is"; not
    "Name, Age" nor "Singer ON")."""
    word = word_at(text, i)
    if not word or not word[0].isupper() or word.isupper() or word.lower() in keywords:
        return False
    j = i + len(word)
    if j >= len(text) or text[j] != " ":
        return False
    second = word_at(text, j + 1)
    return second.isalpha() and second.islower()


def prose_line(line: str, keywords: frozenset[str] = frozenset(), *, headings: bool = True) -> bool:
    """A line that reads as prose around code: a fence (anywhere), or an unindented Markdown
    heading (unless `headings` is False: ``#`` starts a comment in the language), list item or
    sentence (`starts_sentence`). An indented line is code (a docstring's "- item" too)."""
    s = line.strip()
    if s.startswith(("```", "~~~")):
        return True
    if not s or line[:1] in (" ", "\t"):
        return False
    if s.startswith(("**", "- ")) or (headings and s.startswith("#")):
        return True
    if s[:1].isdigit() and s[1:3] in (". ", ") "):
        return True
    return starts_sentence(s, 0, keywords)


def line_run(text: str, accept: Callable[[str], bool], comment: tuple[str, ...] = ()) -> str | None:
    """The first run of lines `accept` takes (blank and `comment` lines inside it kept when an
    accepted line follows them), or None."""
    run: list[str] = []
    pending: list[str] = []
    for line in text.split("\n"):
        s = line.strip()
        if accept(line):
            run.extend(pending)
            run.append(line)
            pending = []
        elif run and (not s or (comment and s.startswith(comment))):
            pending.append(line)
        elif run:
            break
    return "\n".join(run) if run else None


# -- the Domain's side -----------------------------------------------------------------------------
class ActionReading:
    """The `Domain` methods that read actions out of replies and compare them (a mixin of
    `cm_gym.domains.base.Domain`; a domain configures it with `reply_format` and may override
    `canonical_action`)."""

    #: the domain's fence tags and prose recogniser (`ReplyFormat`); default: any fence, else the
    #: text after ``ACTION:``, else the whole reply
    reply_format: ClassVar[ReplyFormat] = ReplyFormat()

    def extract_action(self, text: str) -> Extraction:
        """Where the action of a reply is, or why there is none (`extract` under `reply_format`)."""
        return extract(text, self.reply_format)

    def parse_action(self, text: str) -> str:
        """The action of a free-form reply; when it holds none, the reply without its reasoning
        sections (the world model then says why it does not run). Memoised per domain instance,
        as `parse_problem` (the simulator's replies repeat across decisions)."""
        memo: OrderedDict[str, str] = self.__dict__.setdefault("_action_memo", OrderedDict())
        if text in memo:
            return memo[text]
        found = self.extract_action(text)
        action = memo[text] = found.action if found.action is not None else visible_text(text)
        if len(memo) > 4096:
            memo.popitem(last=False)
        return action

    def parse_problem(self, action: str) -> str | None:
        """Why `action` (what `parse_action` returned) is no usable action, or None when it is
        one. Memoised per domain instance (actions repeat across decisions)."""
        memo: OrderedDict[str, str | None] = self.__dict__.setdefault("_problem_memo", OrderedDict())
        if action in memo:
            return memo[action]
        found = self.extract_action(action) if action.strip() else None
        answer = "the reply is empty" if found is None else (None if found.found else found.problem)
        memo[action] = answer
        if len(memo) > 4096:
            memo.popitem(last=False)
        return answer

    def canonical_action(self, text: str) -> str:
        """The form in which two actions compare equal when they mean the same (whether memory
        changed an action; classifying a real model's revisions). Default: whitespace runs
        collapsed; domains override it with their parsed, normalised form."""
        return " ".join(text.split())

    def action_key(self, action: str) -> str | None:
        """`canonical_action` of a usable action, None for no usable action."""
        return None if self.parse_problem(action) is not None else self.canonical_action(action)

    def action_changed(self, draft: str, action: str) -> bool:
        """Whether `action` is another action than `draft`: their canonical forms differ. An
        unusable draft revised into another unusable reply is no change (no usable action)."""
        if draft.strip() == action.strip():
            return False
        before, after = self.action_key(draft), self.action_key(action)
        if before is None and after is None:
            return False
        return before != after
