"""The settings of verified memory construction (`build_memory`): the paper's defaults for
Algorithm 1 (K alternatives, expansions, capacity, ε_adm, τ_adm, ρ) and the switches of its
ablations, checked when the configuration is made."""

from __future__ import annotations

from dataclasses import dataclass, field

from cm_gym.agent import REUSE_LABEL_RULES
from cm_gym.memory.admission import AdmissionWeights
from cm_gym.memory.retention import RETENTION_POLICIES, RetentionWeights


@dataclass(frozen=True)
class ConstructionConfig:
    """Construction settings (paper defaults). `verification_budget` caps the evaluator calls spent
    on alternatives over the whole build (None = unlimited; counted cumulatively across resumes).

    `reuse_label_rule` labels construction-time reuse ("draft": against the memory-free draft
    checked on a fork, SPEC §3 *Amended*; "paper": Appendix B.3). `refuse_false_on_source` refuses
    a record whose condition is false on its own source task (it contradicts its own evidence);
    `refuse_vacuous` refuses one whose condition holds on every task of T_build — the build task
    list `build_memory` was given, when it has at least `vacuous_min_tasks` tasks (fewer prove
    nothing) — an empty condition too: such a record would be offered at every decision.

    `admit_a_minus` ("auto" | "real" | "any", `cm_gym.memory.provenance`): "auto" admits only an
    a⁻ that is real model text when the decision's draft was real (stores built from recorded or
    local-model drafts never store a simulated disturbance of a real draft as a real mistake);
    "real" requires it always; "any" admits every a⁻."""

    K: int = 4
    max_expansions: int = 2
    capacity: int = 200
    retention: str = "utility"
    reuse_policy: str = "top1"
    epsilon_adm: float = 0.05
    tau_adm: float = 0.1
    rho: float = 0.3
    verification_budget: int | None = None
    k: int = 3
    lambda_reuse: float = 0.2
    use_conditions: bool = True
    use_llm_alternatives: bool = True
    #: False = the "CF without WM" ablation (paper Fig. 4a): after a failure the generator's first
    #: proposal is stored as untested advice — no world-model check, its claimed Δ = 1 − U(o), the
    #: evidence's a⁺ feedback says it was not checked; admission and retention run as usual.
    verify: bool = True
    reuse_label_rule: str = "draft"
    refuse_false_on_source: bool = True
    refuse_vacuous: bool = True
    vacuous_min_tasks: int = 20
    admission_weights: AdmissionWeights = field(default_factory=AdmissionWeights)
    retention_weights: RetentionWeights = field(default_factory=RetentionWeights)
    seed: int = 0
    admit_a_minus: str = "auto"

    def __post_init__(self) -> None:
        if self.retention not in RETENTION_POLICIES:
            raise ValueError(f"retention must be one of {RETENTION_POLICIES}, got {self.retention!r}")
        if self.reuse_label_rule not in REUSE_LABEL_RULES:
            raise ValueError(
                f"reuse_label_rule must be one of {REUSE_LABEL_RULES}, got {self.reuse_label_rule!r}"
            )
        if self.admit_a_minus not in ("auto", "real", "any"):  # `provenance.ADMIT_A_MINUS`
            raise ValueError(f"admit_a_minus must be 'auto', 'real' or 'any', got {self.admit_a_minus!r}")
        if self.reuse_policy not in ("top1", "never"):
            raise ValueError(f"reuse_policy must be 'top1' or 'never', got {self.reuse_policy!r}")
        if self.K < 0 or self.max_expansions < 0 or self.capacity < 1:
            raise ValueError("K and max_expansions must be >= 0 and capacity >= 1")
