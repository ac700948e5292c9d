"""Help texts that answer the questions a first run raises (issue 36): what diagnose's ``place``
column is, and what `serve-llm` answers (cm_gym's own prompts only; a chat client gets 400)."""

from __future__ import annotations

from cm_gym.cli import make_parser


def _help(command: str) -> str:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    return " ".join(sub.format_help().split())


def test_diagnose_help_explains_the_place_column() -> None:
    text = _help("diagnose")
    assert "'place'" in text and "(score - random) / (oracle - random)" in text
    assert "0 is no better than a random valid choice" in text and "1 is as good as the oracle" in text


def test_the_diagnose_table_explains_its_place_column() -> None:
    from cm_gym.studies.analysis.diagnose import PLACE_NOTE, diagnose_table

    result = {
        "config": {"benchmark": "SQL", "seeds": [0]},
        "split": {"eval": 16},
        "records": 5,
        "scores": {"random": {"score": 80.0}, "top1": {"score": 85.0}, "oracle": {"score": 90.0}},
        "oracle_minus_random": 10.0,
        "place_between_random_and_oracle": {"top1": 0.5},
        "headroom_eval": {"decisions": 20, "skip_unique_best": 0.1, "some_slot_beats_skip": 0.2, "all_options_tie": 0.7},
        "slots": [],
        "feature_auc": {},
        "supervised": {"train_pairs": 0, "eval_pairs": 0, "heldout_auc_helps": None},
    }  # fmt: skip
    lines = diagnose_table(result).splitlines()
    assert any(line.rstrip().endswith("place 0.50") for line in lines)
    assert PLACE_NOTE in lines and "(score - random) / (oracle - random)" in PLACE_NOTE
    result["place_between_random_and_oracle"] = {"top1": None}  # oracle and random tie: no column
    assert PLACE_NOTE not in diagnose_table(result).splitlines()


def test_serve_llm_help_says_it_answers_only_cm_gym_prompts() -> None:
    text = _help("serve-llm")
    assert "answers only prompts rendered by cm_gym's templates" in text and "HTTP 400" in text
