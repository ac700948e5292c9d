from __future__ import annotations

from cm_gym.domains.base import token_diff, tokens
from tests.toy_domain import ToyDomain, toy_tasks


def test_default_apply_contrast_matches_whole_tokens_only() -> None:
    domain, task = ToyDomain(), toy_tasks(1)[0]
    assert domain.apply_contrast(task, "x >= 3 AND y > 2", "age > 18", "age >= 18") == "x >= 3 AND y >= 2"
    assert domain.apply_contrast(task, "x >= 3", "age > 18", "age >= 18") is None


def test_token_diff_and_contrast_keys_are_inverse() -> None:
    assert tokens("age>=18") == ["age", ">=", "18"]
    assert token_diff("age > 18", "age >= 18") == [(">", ">=")]
    domain = ToyDomain()
    assert domain.contrast_key("a > 1", "a >= 1") == "> -> >="
    assert domain.inverse_contrast_key("a > 1", "a >= 1") == domain.contrast_key("a >= 1", "a > 1")


def test_parse_action_reads_fences_and_prefixes() -> None:
    domain = ToyDomain()
    assert domain.parse_action("Here:\n```sql\nSELECT 1\n```\nthanks") == "SELECT 1"
    assert domain.parse_action("ACTION: x > 1") == "x > 1"
    assert domain.parse_action("  x > 2 ") == "x > 2"
