"""Pure statistics for calibrated memorization claims (docs/architecture.md, "Statistics").

Every function is pure, typed, validates its arguments (``ValueError`` naming the parameter) and
returns a frozen result object that cites its source. This package imports nothing else of calib.
docs/statistics.md states every definition, its assumptions and its reference.
"""

from calib.stats.beta_law import (
    ControlsPlan,
    FprLaw,
    fpr_law,
    plan_controls,
)
from calib.stats.bootstrap import (
    BootstrapInterval,
    bootstrap_ci,
)
from calib.stats.budget import (
    BudgetResult,
    attempts_needed,
    generation_probability,
    log10_min_probability_within,
    min_probability_within,
)
from calib.stats.census import (
    CensusResult,
    CensusThreshold,
    census,
    census_threshold,
    character_margins,
)
from calib.stats.census_curve import CoverageCurve, coverage_by_margin, window_coverage
from calib.stats.compare import (
    ADJUSTMENTS,
    Kappa,
    adjust_p_values,
    cohen_kappa,
    holm,
    mcnemar_exact,
)
from calib.stats.conformal import (
    CalibratedRate,
    ConformalCalibration,
    alpha_dagger,
    calibrate,
    conformal_k,
    conformal_test,
    min_controls,
    p_values,
    parse_alpha,
    sweep,
)
from calib.stats.counterfactual import (
    LONG_COLUMNS,
    WIDE_SCHEMA,
    CounterfactualRates,
    TargetReferenceTable,
    counterfactual_rates,
    wide_from_long,
)
from calib.stats.intervals import (
    IndependentDifference,
    PairedDifference,
    ProportionInterval,
    ShiftedInterval,
    clopper_pearson,
    independent_difference,
    paired_difference,
)
from calib.stats.multiple import (
    BenjaminiHochberg,
    BonferroniPlan,
    benjamini_hochberg,
    bonferroni_max_candidates,
    bonferroni_min_controls,
)
from calib.stats.passk import (
    PassAtK,
    jensen_shannon,
    pass_at_k,
    pass_at_k_summary,
)
from calib.stats.proxies import (
    OperatingPoint,
    ProxyEvaluation,
    RocCurve,
    evaluate_proxy,
    roc_auc,
    roc_curve,
    tpr_at_fpr,
)
from calib.stats.regression import (
    Coefficient,
    LogisticFit,
    logistic_regression,
)
from calib.stats.result import Result, plain

__all__ = [
    "ADJUSTMENTS",
    "BenjaminiHochberg",
    "BonferroniPlan",
    "BootstrapInterval",
    "BudgetResult",
    "CalibratedRate",
    "CensusResult",
    "CensusThreshold",
    "Coefficient",
    "ConformalCalibration",
    "ControlsPlan",
    "CounterfactualRates",
    "CoverageCurve",
    "FprLaw",
    "IndependentDifference",
    "Kappa",
    "LONG_COLUMNS",
    "LogisticFit",
    "OperatingPoint",
    "PairedDifference",
    "PassAtK",
    "ProportionInterval",
    "ProxyEvaluation",
    "Result",
    "RocCurve",
    "ShiftedInterval",
    "TargetReferenceTable",
    "WIDE_SCHEMA",
    "adjust_p_values",
    "alpha_dagger",
    "attempts_needed",
    "benjamini_hochberg",
    "bonferroni_max_candidates",
    "bonferroni_min_controls",
    "bootstrap_ci",
    "calibrate",
    "census",
    "census_threshold",
    "character_margins",
    "clopper_pearson",
    "cohen_kappa",
    "conformal_k",
    "conformal_test",
    "counterfactual_rates",
    "coverage_by_margin",
    "evaluate_proxy",
    "fpr_law",
    "generation_probability",
    "holm",
    "independent_difference",
    "jensen_shannon",
    "log10_min_probability_within",
    "logistic_regression",
    "mcnemar_exact",
    "min_controls",
    "min_probability_within",
    "p_values",
    "paired_difference",
    "parse_alpha",
    "pass_at_k",
    "pass_at_k_summary",
    "plain",
    "plan_controls",
    "roc_auc",
    "roc_curve",
    "sweep",
    "tpr_at_fpr",
    "wide_from_long",
    "window_coverage",
]
