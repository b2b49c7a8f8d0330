"""The decision rules of Part II's claims (percolation dynamics of SGD), declared as data.

``declared`` is the commit that introduced the rule (``git log -S`` on the chapter's
``record_claim``/``glue`` of the claim, or on the rule's threshold in the library). Three rules
were written or changed after the data they decide had been seen (issue 24): the window of
``block_percolation``, the "room" rule of ``fragmentation_causes`` and the censoring rule of
``grokking_delayed``; each carries its first rule, and its chapter records the verdict under both.
The cascade claims were re-judged by the test of issue 24 after the first test's verdicts were
known: their first rule is that test, whose verdict :func:`first_cascade_verdict` reconstructs.

Explained in: book/ledger.md
"""

from __future__ import annotations

import math
from typing import Any

from flowlaws.book.rules.rule import FirstRule, Rule

__all__ = ["CASCADE_TEST", "FIRST_CASCADE_TEST", "PERCOLATION_RULES", "first_cascade_verdict"]

CASCADE_TEST = ("judge_cascade (II.5, issue 24): run-level null of dealt jumps, persistent peaks "
                "that must be geometric (λ in LAM_GEOM with its interval excluding 1, p_c within "
                "PC_REACH, χ² fit), three peaks only with an independent p_c, power by injecting "
                "as many levels as the data shows, Holm over the chapter's family")
FIRST_CASCADE_TEST = ("judge_cascade before issue 24: 'cascade' when p ≤ α and four persistent "
                      "comb teeth, geometry never checked; λ 'holds' within 15 % (LAM_TOL); 'no "
                      "cascade' at a power point estimate ≥ 0.8")
NEW_TEST = "cda2a6a"  # the commit of the cascade test of issue 24 (CascadeConfig, geometry)
_WHY_NEW = ("issue 24: the first test called evenly spaced and randomly placed shared levels "
            "cascades and judged λ by a 15 % tolerance that passed a value 4.7 standard errors "
            "from 2")
_MARGIN = "λ̂'s 95 % interval inside λ·(1 ± 0.10) (config.LAM_MARGIN)"


def _revised(first_declared: str, seen: str) -> FirstRule:
    return FirstRule(rule=FIRST_CASCADE_TEST, declared=first_declared, revised=NEW_TEST,
                     why=_WHY_NEW, seen=seen)


def first_cascade_verdict(v: Any, *, rejected: bool | None = None, check_lam: bool = True
                          ) -> str:
    """The verdict under the first rule of a cascade claim ("a cascade with λ ≈ the claimed λ"),
    reconstructed from a cascade verdict's attributes (``p_value``, ``alpha``, ``peaks``,
    ``lam``, ``lam_claimed``, ``power``): found when ``p ≤ α`` with four persistent peaks
    (geometry not required) and, when ``rejected`` is given, Holm's correction rejects; then
    "holds" within 15 % of the claimed λ, else "fails" (``check_lam=False``: "holds" whatever
    λ, as grokking_cascade's first rule read it); "fails" for a point power ≥ 0.8 without a
    cascade; else "inconclusive at this size"."""
    found = v.p_value <= v.alpha and len(v.peaks) >= 4 and rejected is not False
    if found and not check_lam:
        return "holds"
    if found and math.isfinite(v.lam):
        return "holds" if abs(v.lam - v.lam_claimed) <= 0.15 * v.lam_claimed else "fails"
    if not found and math.isfinite(v.power) and v.power >= 0.8:
        return "fails"
    return "inconclusive at this size"

_PER_CHAPTER = "the chapter's parameters (tests/smoke_params.yaml at smoke size)"

PERCOLATION_RULES: tuple[Rule, ...] = (
    Rule("sde_model",
         statistic="largest distance of an identical pair and largest |weight| of a dead neuron "
                   "along SGD and its SDE; the same under isotropic noise",
         threshold="holds when SGD and the SDE keep them below 1e-9 and exactly 0 and isotropic "
                   "noise moves both above 1e-3",
         margin="1e-9 (rounding) and 1e-3 (a control that must leave)",
         window="the whole run", size="II.1's parameters",
         reason="an invariant set is kept exactly; the control shows the check can fail",
         declared="27c3ace"),
    Rule("trapping",
         statistic="escape fraction of quartic-potential runs at each noise level ζ",
         threshold="holds when every fraction is at most the supermartingale bound "
                   "(θ0/a)^(1 − 2μ/ζ²) plus two binomial standard errors",
         margin="two standard errors of a fraction of 5 × n_runs runs",
         window="escape_zetas, up to escape_time", size="5 × n_runs runs per ζ (II.2)",
         reason="the bound is the seed's mechanism; the runs estimate a probability",
         declared="27c3ace"),
    Rule("trapping_sync",
         statistic="change of the merged fraction of planted identical pairs over the run, mean "
                   "over networks",
         threshold="holds when the mean does not fall; fails when it falls by more than two "
                   "standard errors; inconclusive in between",
         margin="two standard errors over networks", window="lr_default, n_steps",
         size="n_nets networks (II.2)", reason="'stay identical' is a merged fraction that "
                                                "does not fall", declared="27c3ace"),
    Rule("reeb_merges",
         statistic="merges and splits per run in the Reeb graph, noisy and quiet phases, at the "
                   "finest checkpoint resolution",
         threshold="holds when the noisy phase has more merges than splits and the quiet phase "
                   "more splits than merges; inconclusive when a phase has no event",
         margin="none (counts)", window="noisy: step ≤ steps_hot; quiet: after",
         size="II.3's runs", reason="condense under noise, fragment without it",
         declared="27c3ace"),
    Rule("block_percolation",
         statistic="mean largest one-step jump of C_max/N of each block merge process, at the "
                   "smallest and the largest N; for a process whose largest jump sits at "
                   "p > 0.95 (uniform kernels, p_c = 1) the largest jump at p ≤ 0.95 p_c",
         threshold="holds when some block process's jump does not shrink from the smallest N "
                   "to the largest; fails when every one shrinks",
         margin="none (means of n_runs runs)", window="p ≤ 0.95 p_c for uniform kernels; "
                                                       "the whole axis otherwise",
         size="II.4's sizes and n_runs",
         reason="a discontinuity at an interior critical point keeps a jump there; the "
                "uniform kernel's O(1) jump is its last merges at p = 1, where every "
                "coalescence ends", declared="6eba601",
         first=FirstRule(
             rule="the largest jump anywhere on the axis (max_mean): holds when some block "
                  "process's largest jump does not shrink with N",
             declared="8f3ae6d", revised="6eba601",
             why="the largest jump of uniform merges sits at p → 1, the end of every "
                 "coalescence, not at an interior critical point",
             seen="II.4's sweep showed the uniform kernel's largest jump of order one (and at "
                  "p ≤ 0.95 falling 0.08 → 0.006 from N = 256 to 4096) before the window was "
                  "written (6eba601's message)")),
    Rule("dsi_pairwise_lambda2",
         statistic=CASCADE_TEST + ", on the hierarchical pairwise-merging model",
         threshold="holds for a cascade whose λ̂ interval lies inside the margin around 2; fails "
                   "for 'no cascade' or an interval outside it; inconclusive otherwise",
         margin=_MARGIN, window="the merged fraction p over [0, 1]",
         size="ctl_units units, ctl_runs runs, the chapter's CascadeConfig preset (II.5), or the "
              "stored full preset's 256 runs of 256 units with the size search at 64-512 runs "
              "(presets.controls: the sizes II.5's parameter cell named as its full preset, "
              "declared as a preset before it ran)",
         reason="a claimed λ is judged by its interval, not by a tolerance",
         declared=NEW_TEST,
         first=_revised("3373c9d", "II.5 read λ = 1.81 ± 0.04 as 'holds' at power 0.50")),
    Rule("dsi_kinematic",
         statistic=CASCADE_TEST + ", on the kinematic ring",
         threshold="as dsi_pairwise_lambda2, at λ = 2", margin=_MARGIN,
         window="the ring's merged fraction",
         size="kin_units units, kin_runs runs (II.5), or the stored full preset's 256 runs of "
              "256 units, resampled at 64-512 runs (presets.controls, declared before it ran)",
         reason="the seed's 'λ ≈ 2'", declared=NEW_TEST,
         first=_revised("3373c9d", "II.5's ring: inconclusive at every size tried")),
    Rule("dsi_sgd",
         statistic=CASCADE_TEST + ", at every (lr, B) of the slider grid over the full ensemble, "
                   "or, when its full preset is stored, at every setting of the declared SGD "
                   "search (cascade.search.SGD_SEARCH, judged by its NEW_TEST_RULE)",
         threshold="holds when some setting is a cascade after Holm's correction; fails when "
                   "every setting is 'no cascade'; inconclusive otherwise",
         margin="Holm at α over the grid", window="every recorded SGD step",
         size="n_runs runs × n_steps steps per setting, the slider's CascadeConfig (II.5); the "
              "search: 24 settings × 128 runs × 4,000 steps (its scope added in ce439d4, before "
              "this test judged it)",
         reason="a grid of settings is a family of tests", declared=NEW_TEST,
         first=_revised("3373c9d", "II.5's grid: no cascade after Holm, inconclusive settings")),
    Rule("adam_cascade",
         statistic=CASCADE_TEST + ", for Adam and AdamW ensembles at the claimed λ",
         threshold="holds when both optimisers give a cascade whose λ̂ interval lies inside the "
                   "margin after Holm; fails when either fails; inconclusive otherwise",
         margin=_MARGIN, window="every recorded step",
         size="n_runs runs per optimiser, the chapter's CascadeConfig preset (II.6), or the "
              "stored full preset's 1,024 runs × 20,000 steps per optimiser (declared in "
              "f87d78a for a GPU, before it ran; run on the CPU from 5118d55, the rule "
              "unchanged; its power curve's sizes 128–1,024 resampled runs set in 0ac22ea, "
              "before it gave a verdict)",
         reason="the claim is a conjunction", declared=NEW_TEST,
         first=_revised("361f6a7", "II.6: inconclusive for Adam and AdamW")),
    Rule("grokking_delayed",
         statistic="per run: step of memorisation (train acc ≥ 0.99) and of generalisation "
                   "(test acc ≥ 0.9), their ratio, test accuracy at memorisation",
         threshold="fails when test accuracy at memorisation is not near chance (median "
                   "≥ 3/p) or some run generalised less than 5× later than it memorised; holds "
                   "when at least 90 % of the runs generalised; inconclusive otherwise (a run "
                   "not generalised by the last step is censored)",
         margin="5× (ratio), 90 % of runs", window="the stored run's steps",
         size="n_runs runs of the stored run (II.7), or the CPU full preset's 32 runs × 24,000 "
              "steps (declared in ce439d4, before it ran)",
         reason="a censored run's delay is at least its length over its memorisation step, so "
                "it cannot contradict the claim and cannot confirm it",
         declared="7ec0347",
         first=FirstRule(
             rule="holds when at least 90 % of the runs generalised, the median ratio is at "
                  "least 5 and test accuracy at memorisation is near chance; fails otherwise",
             declared="7837fa6", revised="7ec0347",
             why="a run that has not generalised by the last step was counted against the "
                 "claim, although its delay can only be longer",
             seen="the reader preset's stored runs: not every run generalised within the 8,000 "
                  "steps (7837fa6's chapter text, 19 minutes before the revision)")),
    Rule("grokking_cascade",
         statistic=CASCADE_TEST + ", on every order parameter and alignment of II.7 (aligned "
                   "series with the grokking step as independent p_c)",
         threshold="holds when some test gives a cascade after Holm whose λ̂ interval lies inside "
                   "the margin around 2.11; fails when every test gives 'no cascade' or a cascade "
                   "with λ outside it; inconclusive otherwise",
         margin=_MARGIN, window="the steps before the test-accuracy jump",
         size="n_runs runs of the stored run, the chapter's CascadeConfig preset (II.7)",
         reason="the seed's three-peak cascade with λ ≈ 2.11", declared=NEW_TEST,
         first=_revised("7837fa6", "II.7: no cascade found, smallest p 0.63, power not "
                                   "measurable on the aligned grids; λ never checked")),
    Rule("heart_lambda171",
         statistic=CASCADE_TEST + ", on the Heart Disease ensemble at λ = 1.71",
         threshold="as dsi_pairwise_lambda2 at λ = 1.71, after Holm over the two data sets",
         margin=_MARGIN, window="every recorded step",
         size="n_runs runs (II.8), or the stored full preset's 2,048 runs",
         reason="the seed's λ = 1.71", declared=NEW_TEST,
         first=_revised("361f6a7", "II.8: inconclusive, power 0.25 at 128 runs, 0.10 at 512")),
    Rule("images_cascade",
         statistic=CASCADE_TEST + ", on the image ensemble at λ = 2.11",
         threshold="as dsi_pairwise_lambda2 at λ = 2.11, after Holm over the two data sets",
         margin=_MARGIN, window="every recorded step",
         size="n_runs runs (II.8), or the stored full preset's 512 runs",
         reason="the seed reports patterns similar to its grokking cascade",
         declared=NEW_TEST, first=_revised("361f6a7", "II.8: inconclusive on the digits")),
    Rule("fragmentation",
         statistic="fraction of runs whose merged pairs split after a task switch minus that "
                   "after a switch to the same task (control), Newcombe interval",
         threshold="holds when the interval lies above 0; fails when it lies below "
                   "smallest_effect; inconclusive otherwise",
         margin="level (95 %) interval; smallest_effect", window="after the switch",
         size="n_runs runs per case (II.9)", reason="runs are independent binomial trials",
         declared="6b7725e"),
    Rule("fragmentation_causes",
         statistic="split-fraction differences: largest − smallest teacher scale at batch_after "
                   "(curvature); largest − smallest batch at each scale (less noise)",
         threshold="each contrast by the fragmentation rule; less noise judged only at scales "
                   "where under 1 − smallest_effect of the noisier runs split ('room'); holds "
                   "when every judged contrast holds, fails when one fails",
         margin="level (95 %) Newcombe intervals; smallest_effect",
         window="teacher_scales × batch_sizes_after", size="n_runs runs per case (II.9)",
         reason="where nearly every noisier run splits, less noise has no room to split more",
         declared="e8a1d8f",
         first=FirstRule(
             rule="every contrast by the fragmentation rule at every scale, no room filter",
             declared="6b7725e", revised="e8a1d8f",
             why="at scales where nearly all runs split, the noise contrast is bounded near 0 "
                 "and reads 'fails' whatever noise does",
             seen="6b7725e's chapter printed the noise contrast at every scale ('less noise "
                  "splits more runs at k of n scales') before the room rule was written")),
)
