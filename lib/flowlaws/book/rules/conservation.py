"""The decision rules of Part I's claims (conservation laws), declared as data.

Each rule reads the chapter's own results; ``declared`` is the commit that introduced the rule
(``git log -S`` on the chapter's ``record_claim``/``glue`` of the claim).

Explained in: book/ledger.md
"""

from __future__ import annotations

from flowlaws.book.rules.rule import FirstRule, Rule

__all__ = ["CONSERVATION_RULES"]

_CERTIFIED = "exact: a count is an integer from a certified rank (else inconclusive)"

CONSERVATION_RULES: tuple[Rule, ...] = (
    Rule("linear_relu_laws",
         statistic="number of laws (certified rank count) of linear and ReLU networks, and the "
                   "drift of the laws along the gradient-flow ODE",
         threshold="holds when every count equals r(r+1)/2 (linear) or r (ReLU) and the drift "
                   "stays below 1e-8; fails otherwise",
         margin=_CERTIFIED, window="widths count_widths; flow to t_max",
         size="one network per width (I.1's parameters)",
         reason="the closed forms are the seed's premise; a count is exact or not",
         declared="27c3ace"),
    Rule("ffn_gelu_none",
         statistic="certified count of laws of GELU and SiLU feed-forward blocks",
         threshold="holds when every count is 0; fails otherwise",
         margin=_CERTIFIED, window="the chapter's widths", size="I.2's parameters",
         reason="'nothing but constants' is a count of zero", declared="27c3ace"),
    Rule("swiglu_one_per_unit",
         statistic="certified count of laws of SwiGLU blocks, and the drift of the claimed law "
                   "along the flow",
         threshold="holds when every count equals the width and the drift stays below 1e-8",
         margin=_CERTIFIED, window="the chapter's widths", size="I.2's parameters",
         reason="one law per hidden unit is a count equal to the width", declared="27c3ace"),
    Rule("mha_per_head",
         statistic="certified count per attention layer, and |cos| of the claimed laws' time "
                   "derivative with the gradient",
         threshold="holds when every count equals H[d_k(d_k+1)/2 + d_v(d_v+1)/2] and |cos| is "
                   "below LAW_TOL",
         margin=_CERTIFIED + "; LAW_TOL for a law's |cos|", window="the chapter's layer sizes",
         size="I.3's parameters", reason="the closed form of the seed's statement",
         declared="27c3ace"),
    Rule("sinpe_same",
         statistic="certified count with sinusoidal positional encoding against none",
         threshold="holds when the counts are equal in every layer", margin=_CERTIFIED,
         window="the chapter's layer sizes", size="I.3's parameters",
         reason="'unchanged' is an equal count", declared="27c3ace"),
    Rule("rope_blocks",
         statistic="certified count with RoPE, |cos| of the 2x2 block laws and of the full Q/K "
                   "law",
         threshold="holds when the count equals H[d_k/2 + d_v(d_v+1)/2], the block laws' |cos| "
                   "is below LAW_TOL and the full Q/K law's above it",
         margin=_CERTIFIED + "; LAW_TOL", window="the chapter's layer sizes",
         size="I.3's parameters", reason="the closed form of the seed's statement",
         declared="27c3ace"),
    Rule("moe_laws",
         statistic="certified count of the dense softmax-gated MoE layer",
         threshold="holds when it equals the seed's count", margin=_CERTIFIED,
         window="dense softmax gate", size="I.4's parameters",
         reason="the seed's statement is a count", declared="27c3ace"),
    Rule("moe_sparse_dense",
         statistic="certified count of the softmax MoE layer with top-k routing, every k",
         threshold="holds when every count equals the seed's dense count", margin=_CERTIFIED,
         window="every k of the chapter", size="I.4's parameters",
         reason="'exactly the laws of the dense layer' is an equal count", declared="27c3ace"),
    Rule("moe_sigmoid_gate",
         statistic="certified count of the normalized-sigmoid-gated layer",
         threshold="holds when it equals the seed's count", margin=_CERTIFIED,
         window="dense sigmoid gate", size="I.4's parameters",
         reason="the seed's statement is a count", declared="27c3ace"),
    Rule("discrete_tau2k_bound",
         statistic="conservation error of gradient descent against τ²Σ‖g_j‖² at every step",
         threshold="holds when the error is at most the bound (+1e-12) at every step",
         margin="1e-12 (rounding)", window="every step of the long run",
         size="one run per step size (I.5's lrs)",
         reason="the seed's O(τ²k) read as an upper bound",
         declared="8f5d650",
         first=FirstRule(
             rule="one claim, discrete_tau2k: holds when the slope in k of the measured error is "
                  "above 1/2 at the end of the scan (today's discrete_tau2k_scaling)",
             declared="20cca15", revised="8f5d650",
             why="the seed's O(τ²k) is also a bound, which the chapter verifies; the single "
                 "claim read 'fails' for a bound that holds",
             seen="the slope in k fell from 0.97 to 0 by t = 1.5 (I.5 at 20cca15)")),
    Rule("discrete_tau2k_scaling",
         statistic="slope in k of log error against log k, at the end of the scan",
         threshold="holds when the slope is above 1/2 (between exponents 0 and 1) for every τ",
         margin="none beyond the threshold", window="the last times of the scan",
         size="one run per step size (I.5's lrs)",
         reason="1/2 separates an error that grows like k from one that stops growing",
         declared="20cca15"),
    Rule("deep_transformer_laws",
         statistic="largest relative rate of every law of every block under the flow; gap and "
                   "τ exponent of one GD step against τ²h(g)",
         threshold="holds when the rate is below rate_tol and gap and |exponent − 2| below "
                   "step_tol; inconclusive when the control (RoPE rows, not laws) has a rate "
                   "≤ 1e-3 (the check would not have seen a non-law)",
         margin="rate_tol, step_tol (I.6's parameters)", window="every block",
         size="I.6's model (deep_layers, deep_d_model)",
         reason="a law's rate is zero up to rounding; a non-law's is not",
         declared="1c5e899"),
)
