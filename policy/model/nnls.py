"""Non-negative least squares for the handful of columns a throughput model has.

Lawson and Hanson's active-set method (*Solving Least Squares Problems*, 1974, ch. 23),
the algorithm behind ``scipy.optimize.nnls``, written out for at most a dozen columns and
a few dozen rows: the webhook's image carries neither numpy nor scipy (they are the
simulator's, ``sim`` extra), and at this size plain Python solves one fit in well under a
millisecond. Each unconstrained sub-problem is solved by modified Gram-Schmidt QR on
columns scaled to unit norm, never by the normal equations (which square the condition
number of columns as different as ``1/w`` and ``w``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Matrix = Sequence[Sequence[float]]


def _least_squares(a: Matrix, b: Sequence[float], cols: Sequence[int]) -> dict[int, float]:
    """The unconstrained least-squares solution on ``cols`` (others held at 0); a column
    dependent on those before it gets 0."""
    m = len(b)
    q: list[list[float]] = []
    r: list[list[float]] = []  # upper-triangular, by kept column
    kept: list[int] = []
    for j in cols:
        v = [a[i][j] for i in range(m)]
        norm0 = math.hypot(*v)
        if norm0 == 0.0:
            continue
        coeffs = [0.0] * len(q)
        # Twice ("twice is enough", Kahan and Parlett): one pass leaves a column of an
        # ill-conditioned set off orthogonal by its rounding, and a column that depends on
        # those kept then looks independent (a 1e-6 entry beside a 3: x went to 1e16).
        for _ in range(2):
            for k, qk in enumerate(q):
                c = sum(qk[i] * v[i] for i in range(m))
                coeffs[k] += c
                v = [v[i] - c * qk[i] for i in range(m)]
        norm = math.hypot(*v)
        if norm <= 1e-10 * norm0:
            continue  # dependent on the columns kept: no information of its own
        q.append([x / norm for x in v])
        r.append([*coeffs, norm])
        kept.append(j)
    qtb = [sum(qk[i] * b[i] for i in range(m)) for qk in q]
    z = [0.0] * len(kept)
    for k in range(len(kept) - 1, -1, -1):
        s = qtb[k] - sum(r[j][k] * z[j] for j in range(k + 1, len(kept)))
        z[k] = s / r[k][k]
    out = dict.fromkeys(cols, 0.0)
    out.update(zip(kept, z, strict=True))
    return out


def nnls(a: Matrix, b: Sequence[float], tol: float = 1e-12) -> list[float]:
    """``x >= 0`` minimising ``|a x - b|``; ``a`` is ``len(b)`` rows of equal length."""
    m = len(b)
    n = len(a[0]) if m else 0
    if any(len(row) != n for row in a):
        raise ValueError("every row of the matrix must have the same number of columns")
    # Scale columns to unit norm (undone at the end): tolerances then mean the same for all.
    scale = [math.hypot(*(a[i][j] for i in range(m))) or 1.0 for j in range(n)]
    s = [[a[i][j] / scale[j] for j in range(n)] for i in range(m)]
    x = [0.0] * n
    passive: list[int] = []

    def gradient() -> list[float]:
        resid = [b[i] - sum(s[i][j] * x[j] for j in range(n)) for i in range(m)]
        return [sum(s[i][j] * resid[i] for i in range(m)) for j in range(n)]

    bnorm = math.hypot(*b) or 1.0
    for _ in range(3 * n + 3):  # each outer step adds a column; Lawson-Hanson ends in few
        w = gradient()
        free = [j for j in range(n) if j not in passive]
        if not free:
            break
        j = max(free, key=lambda k: w[k])
        if w[j] <= tol * bnorm:
            break
        passive.append(j)
        for _ in range(3 * n + 3):
            z = _least_squares(s, b, passive)
            if all(z[k] > tol for k in passive):
                for k in passive:
                    x[k] = z[k]
                break
            # Step toward z as far as x stays non-negative; drop what reaches 0.
            alpha = (
                min(x[k] / (x[k] - z[k]) for k in passive if z[k] <= tol and x[k] - z[k] > 0)
                if any(z[k] <= tol and x[k] - z[k] > 0 for k in passive)
                else 0.0
            )
            for k in passive:
                x[k] += alpha * (z[k] - x[k])
            passive = [k for k in passive if x[k] > tol]
            for k in range(n):
                if k not in passive:
                    x[k] = 0.0
            if not passive:
                break
    return [max(x[j], 0.0) / scale[j] for j in range(n)]
