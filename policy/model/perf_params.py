"""Pollux's step-time model and its fit, ported for a job whose batch the pool chooses.

Source: petuum/adaptdl, commit c793c70 (branch osdi21-artifact), ``simulator/goodput.py``
(the same text as ``adaptdl/adaptdl/goodput.py``). A step's time is compute (linear in the
per-worker batch) and network (a constant plus a retrogression per replica beyond two, with
inter-node and intra-node parameters) combined by a p-norm whose exponent ``gamma`` says how
much they overlap (lines 23-49: 1 none, 10 nearly all).

What differs from the source, and why:

- **No gradient accumulation.** Our workers take one step per batch: Pollux's optimisation
  step alone (``accum_steps`` 0), so its separate accumulation-time error (``_obj_fn``
  ``err1``, line 219) has no readings and is left out.
- **Its single-batch prior without accumulation times.** With one per-worker batch seen
  Pollux fixes ``alpha_c`` at half the mean accumulation time (lines 173-180, "equal weight
  to the constant and multiplicative factors"); we have no accumulation time, so the fit
  keeps that equal weight instead: ``alpha_c = beta_c * local batch``.
- **Inter-node means spread.** A parameter-server job whose workers sync across the network
  (several nodes, or a parameter server on another node: ``Config.spread``) takes Pollux's
  inter-node parameters; the parameter servers themselves are not modelled (Pollux has none).
- **A hand-written bounded minimiser.** scipy is not a dependency of the webhook (only of the
  simulator's extra), so ``scipy.optimize.minimize`` with ``Bounds`` (line 193) becomes
  Nelder-Mead over the logarithms of the free parameters, ``gamma`` kept in [1, 10] by a
  clamp: the same objective and bounds, a slower but dependency-free search, deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

FLOOR = 1e-8  # Pollux's lower bound for every alpha and beta (line 171)
CEILING = 1e6  # seconds: no upper bound in Pollux (np.inf); here exp() must not overflow
GAMMA_MAX = 10.0  # Pollux's upper bound for gamma (line 172)


@dataclass(frozen=True)
class PerfParams:
    """Pollux's ``PerfParams`` (lines 32-50), seconds."""

    alpha_c: float  # constant term of compute time
    beta_c: float  # compute time per example of a worker's batch
    alpha_n: float  # constant term of inter-node network time
    beta_n: float  # inter-node retrogression per replica beyond two
    alpha_r: float  # constant term of intra-node network time
    beta_r: float  # intra-node retrogression per replica beyond two
    gamma: float  # overlap of compute and network: 1 none, 10 nearly all


@dataclass(frozen=True)
class Sample:
    """One reading in Pollux's terms: where the workers ran, each one's batch, and the
    seconds a step took."""

    inter_node: bool
    replicas: int
    local_batch: float
    step_s: float


def accum_time(p: PerfParams, local_batch: float) -> float:
    """``_predict_accum_time`` (lines 232-235): forward and backward passes, linear in the
    batch."""
    return p.alpha_c + p.beta_c * local_batch


def network_time(p: PerfParams, inter_node: bool, replicas: int) -> float:
    """``_predict_network_time`` (lines 243-256): the most significant link's constant, plus
    its retrogression for each replica beyond two; one replica syncs with nobody."""
    if inter_node:
        alpha, beta = p.alpha_n, p.beta_n
    elif replicas > 1:
        alpha, beta = p.alpha_r, p.beta_r
    else:
        alpha = beta = FLOOR
    return alpha + beta * max(replicas - 2, FLOOR)


def log_optim_time(p: PerfParams, accum: float, network: float) -> float:
    """``_predict_log_optim_time`` (lines 238-240): the p-norm of compute and network, in
    logarithms (computed stably: ``gamma`` up to 10 on seconds-sized times)."""
    g = p.gamma
    a, n = math.log(accum), math.log(network)
    top = max(a, n)
    return top + math.log(math.exp(g * (a - top)) + math.exp(g * (n - top))) / g


def step_time(p: PerfParams, inter_node: bool, replicas: int, local_batch: float) -> float:
    """Seconds per step (``GoodputFunction.throughput``, lines 71-79, without accumulation)."""
    accum = accum_time(p, local_batch)
    return math.exp(log_optim_time(p, accum, network_time(p, inter_node, replicas)))


def fit(samples: Sequence[Sample]) -> PerfParams:
    """``fit_perf_params`` (lines 148-206): the parameters of least RMS log error, with
    Pollux's start, bounds, regularisation and priors."""
    start = [1e-1, 1e-2] * 3 + [1.0 + 1e-3]  # line 167
    free = [True] * 7
    single_batch = len({s.local_batch for s in samples}) == 1
    if not any(s.inter_node for s in samples):  # lines 181-184
        free[2] = free[3] = False
    if not any(not s.inter_node and s.replicas > 1 for s in samples):  # lines 185-188
        free[4] = free[5] = False
    if not any(s.replicas > 2 for s in samples):  # lines 189-192
        free[3] = free[5] = False
    if single_batch:
        free[0] = False  # tied to beta_c (see the module's docstring)
    local = samples[0].local_batch if samples else 0.0
    fixed = [v if f else FLOOR for v, f in zip(start, free, strict=True)]
    index = [i for i in range(7) if free[i]]

    def params(x: Sequence[float]) -> PerfParams:
        v = list(fixed)
        for i, xi in zip(index, x, strict=True):
            v[i] = min(max(1.0 + abs(xi), 1.0), GAMMA_MAX) if i == 6 else _bounded(xi)
        if single_batch:
            v[0] = v[1] * local
        return PerfParams(*v)

    def objective(x: Sequence[float]) -> float:
        return _objective(params(x), samples)

    x0 = [abs(start[i] - 1.0) if i == 6 else math.log(start[i]) for i in index]
    best = _nelder_mead(objective, x0)
    p = params(best)
    if not any(s.inter_node for s in samples):
        # Lines 201-204: the prior that inter-node is at least as slow as intra-node.
        p = PerfParams(
            p.alpha_c,
            p.beta_c,
            max(p.alpha_n, p.alpha_r * 1.1),
            max(p.beta_n, p.beta_r * 1.1),
            p.alpha_r,
            p.beta_r,
            p.gamma,
        )
    return p


def _bounded(x: float) -> float:
    """A parameter from its logarithm, within [FLOOR, CEILING]: the bounds Pollux's
    minimiser keeps feasible (``keep_feasible=True``, line 193), so no time is 0."""
    return max(math.exp(min(x, math.log(CEILING))), FLOOR)


def _objective(p: PerfParams, samples: Sequence[Sample]) -> float:
    """``_obj_fn`` (lines 213-229) without the accumulation term."""
    total = 0.0
    for s in samples:
        accum = accum_time(p, s.local_batch)
        pred = log_optim_time(p, accum, network_time(p, s.inter_node, s.replicas))
        total += (pred - math.log(s.step_s)) ** 2
    err = math.sqrt(total / len(samples))
    reg1 = 1e-3 * (p.gamma - 1) ** 2
    reg2 = 1e-2 * ((p.beta_n / p.alpha_n) ** 2 + (p.beta_r / p.alpha_r) ** 2)
    return err + reg1 + reg2


def _nelder_mead(
    f, x0: Sequence[float], step: float = 1.0, evals: int = 3000, tol: float = 1e-10
) -> list[float]:
    """The minimum of ``f`` near ``x0`` by Nelder-Mead (the standard coefficients), restarted
    once from the best point (a collapsed simplex is its known failure)."""
    best = list(x0)
    for _ in range(2):
        best = _simplex(f, best, step, evals // 2, tol)
        step /= 4
    return best


def _simplex(f, x0: Sequence[float], step: float, evals: int, tol: float) -> list[float]:
    n = len(x0)
    if n == 0:
        return []
    pts = [list(x0)] + [[x + (step if j == i else 0.0) for j, x in enumerate(x0)] for i in range(n)]
    vals = [f(p) for p in pts]
    used = n + 1
    while used < evals:
        order = sorted(range(n + 1), key=vals.__getitem__)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] <= tol * (abs(vals[0]) + tol):
            break
        centre = [sum(p[j] for p in pts[:-1]) / n for j in range(n)]
        worst = pts[-1]

        def toward(t: float, c=centre, w=worst) -> list[float]:
            return [cj + t * (cj - wj) for cj, wj in zip(c, w, strict=True)]

        r = toward(1.0)
        fr = f(r)
        used += 1
        if fr < vals[0]:
            e = toward(2.0)
            fe = f(e)
            used += 1
            pts[-1], vals[-1] = (e, fe) if fe < fr else (r, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = r, fr
        else:
            c = toward(0.5) if fr < vals[-1] else toward(-0.5)
            fc = f(c)
            used += 1
            if fc < min(fr, vals[-1]):
                pts[-1], vals[-1] = c, fc
            else:
                best = pts[0]
                pts = [best] + [
                    [b + 0.5 * (x - b) for x, b in zip(p, best, strict=True)] for p in pts[1:]
                ]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                used += n
    return pts[min(range(n + 1), key=vals.__getitem__)]
