"""A small Gaussian process and its expected improvement: the autotuner's Bayesian optimisation.

Why not a library: the search runs inside a training process, on rank 0, beside the training
thread. Optuna's Gaussian-process sampler needs torch and SciPy, scikit-learn's needs SciPy and its
BLAS threads, and both take seconds to import; Optuna's TPE has no notion of the observation noise
Horovod's ``--autotune-gaussian-process-noise`` sets. What is needed here is a few dozen points in
at most four dimensions: numpy does it in well under a millisecond per suggestion.

Points live in the unit cube (the search space maps them to settings); numbers and switches are
dimensions alike (a switch is 0 or 1), so one search covers all of them jointly.
"""

from __future__ import annotations

import math

import numpy as np

#: The Matérn 5/2 kernel's length scale in the unit cube, and how many random candidates the
#: expected improvement is maximised over (with local perturbations of the best point so far).
LENGTH_SCALE = 0.25
CANDIDATES = 2048


def matern52(a: np.ndarray, b: np.ndarray, length_scale: float = LENGTH_SCALE) -> np.ndarray:
    """The Matérn 5/2 covariance between the rows of ``a`` and of ``b``."""
    d = np.sqrt(np.maximum(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1), 0.0)) / length_scale
    covariance: np.ndarray = (1.0 + math.sqrt(5.0) * d + 5.0 / 3.0 * d**2) * np.exp(-math.sqrt(5.0) * d)
    return covariance


class GaussianProcess:
    """A GP regression of scores over points of the unit cube, the scores standardised, with
    ``noise`` the observations' variance relative to theirs (Horovod's gaussian_process_noise)."""

    def __init__(self, points: np.ndarray, scores: np.ndarray, noise: float) -> None:
        self.points = np.asarray(points, float)
        scores = np.asarray(scores, float)
        self.mean, self.scale = float(scores.mean()), float(scores.std()) or 1.0
        self.y = (scores - self.mean) / self.scale
        k = matern52(self.points, self.points) + (max(noise, 0.0) + 1e-9) * np.eye(len(self.points))
        self.chol = np.linalg.cholesky(k)
        self.alpha = np.linalg.solve(self.chol.T, np.linalg.solve(self.chol, self.y))

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of the (standardised) score at each row of ``x``."""
        k = matern52(np.asarray(x, float), self.points)
        mu = k @ self.alpha
        v = np.linalg.solve(self.chol, k.T)
        var = np.maximum(1.0 - (v**2).sum(0), 1e-12)
        return mu, np.sqrt(var)


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = 0.01) -> np.ndarray:
    """How much each candidate is expected to improve on ``best`` (all standardised), maximising."""
    z = (mu - best - xi) / sigma
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z**2) / math.sqrt(2.0 * math.pi)
    improvement: np.ndarray = (mu - best - xi) * cdf + sigma * pdf
    return improvement


def suggest(
    points: np.ndarray, scores: np.ndarray, noise: float, rng: np.random.Generator, switches: list[int]
) -> np.ndarray:
    """The next point to try: the candidate of highest expected improvement over the best score
    seen. ``switches``: the dimensions that are 0 or 1."""
    dims = points.shape[1]
    gp = GaussianProcess(points, scores, noise)
    best = points[int(np.argmax(scores))]
    candidates = np.vstack(
        [
            rng.random((CANDIDATES, dims)),
            np.clip(best + rng.normal(0.0, 0.05, (CANDIDATES // 4, dims)), 0.0, 1.0),
        ]
    )
    candidates[:, switches] = np.round(candidates[:, switches])
    mu, sigma = gp.predict(candidates)
    chosen: np.ndarray = candidates[int(np.argmax(expected_improvement(mu, sigma, float(gp.y.max()))))]
    return chosen
