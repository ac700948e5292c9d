"""The paper's reported numbers, for the "paper" column of every report (CounterMem, arXiv
2609.31874). Only numbers the paper states are here; a cell the paper gives no number for stays
empty in the reports. Table 1's numbers are the gpt-oss-120b groups unless a report says
otherwise (our runs use one LLM; the Gemini groups are kept for reference)."""

from __future__ import annotations

TABLE1_DOMAINS = ("Math", "Coding", "Text-to-SQL", "SAT")

#: Table 1: backbone → agent → mechanism → (Math, Coding, Text-to-SQL, SAT, tokens M).
TABLE1: dict[str, dict[str, dict[str, tuple[float, float, float, float, float]]]] = {
    "gpt-oss-120b": {
        "react": {
            "none": (29.8, 48.7, 26.8, 50.7, 6.0),
            "best_of_n": (34.5, 38.1, 36.2, 41.1, 9.4),
            "expel": (27.4, 56.5, 17.2, 49.0, 5.4),
            "generative_agents": (22.6, 37.1, 17.6, 41.6, 6.2),
            "voyager": (21.9, 60.6, 26.3, 51.4, 5.2),
            "memgpt": (27.3, 39.5, 48.9, 47.0, 5.8),
            "countermem": (57.5, 66.6, 47.0, 58.9, 4.4),
        },
        "reflexion": {
            "none": (40.8, 34.6, 54.6, 61.2, 5.2),
            "best_of_n": (31.8, 21.7, 62.5, 53.6, 10.0),
            "expel": (38.0, 32.8, 68.1, 60.0, 5.0),
            "generative_agents": (36.7, 38.8, 60.4, 48.3, 5.6),
            "voyager": (37.7, 42.6, 55.4, 58.3, 4.5),
            "memgpt": (48.0, 39.1, 47.5, 58.0, 5.7),
            "countermem": (53.4, 40.7, 66.1, 63.7, 4.8),
        },
    },
    "Gemini 3.1 Flash-Lite": {
        "react": {
            "none": (38.5, 30.9, 57.6, 45.0, 5.0),
            "best_of_n": (30.7, 29.0, 67.3, 34.9, 9.6),
            "expel": (57.4, 37.3, 68.6, 37.2, 4.8),
            "generative_agents": (42.4, 31.3, 57.2, 43.9, 5.7),
            "voyager": (39.9, 34.4, 48.2, 55.1, 4.3),
            "memgpt": (31.4, 38.2, 68.5, 45.2, 5.5),
            "countermem": (54.5, 40.0, 71.7, 57.9, 2.9),
        },
        "reflexion": {
            "none": (55.5, 47.7, 59.1, 43.7, 4.3),
            "best_of_n": (58.7, 43.9, 65.6, 54.7, 8.2),
            "expel": (50.3, 43.2, 70.2, 36.8, 4.0),
            "generative_agents": (44.6, 36.6, 66.6, 66.1, 4.9),
            "voyager": (54.9, 37.1, 49.0, 32.1, 3.9),
            "memgpt": (43.8, 38.2, 52.0, 49.5, 4.8),
            "countermem": (74.0, 73.5, 77.8, 62.3, 3.4),
        },
    },
}

#: §5.1: CF Memory − None, four-domain mean (pp), per group; Best-of-N token range (M).
CF_GAIN_RANGE = (8.2, 20.4)
BEST_OF_N_TOKENS = (8.2, 10.0)
CF_TOKENS = (2.9, 4.8)

#: Fig. 2d: held-out score under each retention rule at equal capacity.
RETENTION = {"utility": 65.3, "similarity": 59.8, "recent": 54.2, "random": 51.7}

#: Fig. 3 / §5.3 (the numbers the text states): condition → method → metric.
TRANSFER = {
    "same_env": {"countermem": {"success": 67.4, "coverage": 76.9}, "reasoningbank": {"coverage": 82.4}},
    "new_env": {"countermem": {"success": 52.6}},
    "look_alike": {
        "countermem": {"success": 49.8, "coverage": 91.5, "harmful": 11.8},
        "reasoningbank": {"success": 36.4, "coverage": 88.2, "harmful": 27.6},
    },
}

#: Fig. 4a/4b (ReAct, Reflexion): score gain over the base agent (pp) and calls per solved task.
ABLATION_GAIN = {
    "cf_without_wm": (5.2, 2.1),
    "wm_without_cf": (7.1, 3.4),
    "countermem": (18.5, 8.2),
}
CALLS_PER_SOLVED = {"none": (9.6, 9.1), "cf_without_wm": (10.4, 9.9), "countermem": (7.0, 8.4)}
#: Fig. 4c: score change vs no retrieval (pp), ReAct / Reflexion.
RETRIEVAL_GAIN = {"random": (0.6, 0.4), "shuffled": (-1.1, -0.9), "matched": (18.5, 8.2)}
#: Fig. 4d: action changes and harmful changes per retrieved record (App. D.4: the changes the shown
#: record made ÷ every record retrieved; see `ablations` and `cm_gym.studies.analysis.calibrate`).
PER_RETRIEVED = {"shuffled": (0.21, 0.17), "matched": (0.29, 0.03)}

#: Fig. 7 / E.2 (five-domain averages at a common 6M-token budget; differences stated in the text).
BUDGET = {"countermem": 63.5, "reasoningbank_matts": 63.5 - 7.8, "reasoningbank_verified": 63.5 - 10.4}
BUDGET_FORMAL = {"reasoningbank": 66.1, "reasoningbank_verified": 63.8, "countermem": 73.5}

#: Fig. 8a / E.3: net (rescued − broken) of 120 paired tasks per domain.
RESCUE_NET = {
    "reasoningbank": {"Math": 5, "Coding": 4, "Text-to-SQL": 4, "Formal Verification": -5, "SAT": 5},
    "countermem": {"Math": 25, "Coding": 15, "Text-to-SQL": 31, "Formal Verification": 6, "SAT": 17},
}
RESCUE_PAIRS = 120
#: Fig. 8b: harmful use per selected record use (%), with / without the condition field.
CONDITION_REMOVAL = {"ordinary": (4.2, 6.1), "look_alike": (11.8, 34.2)}
