from __future__ import annotations

from pathlib import Path

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


def test_a_folder_digest_covers_sources_and_data_but_not_bytecode(tmp_path: Path) -> None:
    """`source_digest`'s folder hash (the version of every work memo and default store): a
    changed or added file or a renamed one changes it; bytecode and tool folders never do."""
    from cm_gym.domains.base import _folder_digest

    def digest() -> str:
        _folder_digest.cache_clear()
        return _folder_digest(str(tmp_path))

    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "rates.json").write_text("{}")
    base = digest()
    for junk in ("__pycache__/a.cpython-311.pyc", ".ruff_cache/x", "sub/b.pyc"):
        (tmp_path / junk).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / junk).write_text("junk")
    assert digest() == base
    (tmp_path / "sub" / "rates.json").write_text("{ }")
    assert digest() != base
    (tmp_path / "sub" / "rates.json").write_text("{}")
    (tmp_path / "sub" / "rates.json").rename(tmp_path / "sub" / "other.json")
    assert digest() != base
