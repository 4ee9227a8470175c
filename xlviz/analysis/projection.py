"""2-D projections of embeddings for scatter plots (PCA or UMAP).

Why: the app shows whether two languages' sentence/word vectors overlap or form separate
clouds; a deterministic 2-D projection of the joint set of points is what gets plotted.
umap-learn is imported lazily because importing it costs seconds (numba).
"""

from __future__ import annotations

import warnings

import numpy as np

from xlviz.errors import XlvizError

UMAP_MIN_POINTS = 4  # below this UMAP's spectral layout cannot work (k >= N); use PCA


def project(points, method: str = "pca", seed: int = 0, n_neighbors: int = 15, n_epochs: int = 200) -> np.ndarray:
    """Project ``points`` [n, d] to [n, 2] float32 coordinates.

    ``method="pca"``: deterministic (signs fixed), works for any n >= 1; missing dimensions
    (d == 1 or n <= 2) come back as zero columns. ``method="umap"``: seeded UMAP;
    ``n_neighbors`` is lowered to n - 1 when there are fewer points, and fewer than
    ``UMAP_MIN_POINTS`` points raise an XlvizError telling the user to pick PCA.
    """
    X = np.asarray(points, dtype=np.float64)
    if X.ndim != 2:
        raise XlvizError(f"expected a 2-D array [n, d], got shape {X.shape}", field="points")
    if X.shape[0] == 0:
        raise XlvizError("no points to project", field="points")
    if not np.all(np.isfinite(X)):
        raise XlvizError("contains NaN or infinite values; drop those rows before projecting", field="points")
    if method == "pca":
        return _pca2(X)
    if method == "umap":
        return _umap2(X, seed=seed, n_neighbors=n_neighbors, n_epochs=n_epochs)
    raise XlvizError(f"unknown projection '{method}'; use 'pca' or 'umap'", field="method")


def _pca2(X: np.ndarray) -> np.ndarray:
    Xc = X - X.mean(axis=0)
    U, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    k = min(2, len(S))
    coords = U[:, :k] * S[:k]
    # Fix each component's sign (largest-magnitude loading positive) so plots don't flip.
    for c in range(k):
        if Vt[c, np.argmax(np.abs(Vt[c]))] < 0:
            coords[:, c] = -coords[:, c]
    out = np.zeros((X.shape[0], 2), dtype=np.float32)
    out[:, :k] = coords
    return out


def _umap2(X: np.ndarray, seed: int, n_neighbors: int, n_epochs: int = 200) -> np.ndarray:
    n = X.shape[0]
    if n < UMAP_MIN_POINTS:
        raise XlvizError(
            f"UMAP needs at least {UMAP_MIN_POINTS} points, got {n}; use method='pca'", field="method"
        )
    if n_neighbors < 2:
        raise XlvizError(f"must be at least 2, got {n_neighbors}", field="n_neighbors")
    n_neighbors = min(int(n_neighbors), n - 1)
    import umap  # lazy: slow import

    last_error: Exception | None = None
    # Spectral initialisation can fail on tiny or degenerate graphs; random init still works.
    for init in ("spectral", "random"):
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*n_jobs.*")
                # 200 epochs is UMAP's own choice for large sets; its 500 for small ones
                # (< 10k points) costs 2.5x the time for a picture people cannot tell apart.
                reducer = umap.UMAP(n_components=2, n_neighbors=n_neighbors, random_state=seed, init=init, n_epochs=n_epochs)
                coords = reducer.fit_transform(X)
            coords = np.asarray(coords, dtype=np.float32)
            if np.all(np.isfinite(coords)):
                return coords
            last_error = ValueError("UMAP returned non-finite coordinates")
        except Exception as exc:  # umap/scipy raise assorted types on degenerate input
            last_error = exc
    raise XlvizError(f"UMAP failed on {n} points ({last_error}); use method='pca'", field="method")
