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


# --------------------------------------------------------------------------- the projector
# Several systems' vectors of one parallel set in ONE 2-D space (colour = system, symbol =
# language), a search over the points' texts and cosine neighbours of a point. The neighbours
# come from the original vectors, never from the 2-D picture, which keeps only a few percent of
# the variance and so misplaces most neighbours.


def same_width(widths: dict[str, int]) -> tuple[int, list[str], list[str]]:
    """Which blocks can share one projection: those as wide as the first one.

    Why: PCA (and cosine) need vectors of one width, and systems of different hidden sizes
    have no common space. ``widths`` maps a block's name to its vector width, in the user's
    order; returns ``(width, kept, left_out)`` so a page can project the kept blocks and say
    which were left out, rather than fail on all of them.
    """
    if not widths:
        raise XlvizError("no vectors to project", field="systems")
    names = list(widths)
    width = int(widths[names[0]])
    kept = [n for n in names if int(widths[n]) == width]
    return width, kept, [n for n in names if n not in kept]


def shared_projection(blocks, names=None, method: str = "pca", seed: int = 0) -> list[np.ndarray]:
    """2-D coordinates of several blocks of vectors ([n_i, d] each) in one shared space.

    The projection (PCA, or UMAP) is fitted on the union of all blocks, so a point of one
    system and a point of another sit in the same coordinates and can be compared on the
    picture. Returns one [n_i, 2] float32 array per block, in order. Blocks of different widths
    raise an XlvizError naming them (``names``: labels for that message).
    """
    arrays = [np.asarray(b, dtype=np.float64) for b in blocks]
    if not arrays:
        raise XlvizError("no vectors to project", field="systems")
    labels = list(names) if names is not None else [f"block {i}" for i in range(len(arrays))]
    for a, label in zip(arrays, labels):
        if a.ndim != 2:
            raise XlvizError(f"{label}: expected vectors [n, d], got shape {a.shape}", field="points")
    widths = {label: a.shape[1] for a, label in zip(arrays, labels)}
    width, _, left_out = same_width(widths)
    if left_out:
        raise XlvizError(f"one projection needs vectors of one width: {labels[0]} has {width}, "
                         + ", ".join(f"{n} has {widths[n]}" for n in left_out)
                         + "; compare systems of the same hidden size", field="systems")
    coords = project(np.vstack(arrays), method=method, seed=seed)
    out, lo = [], 0
    for a in arrays:
        out.append(coords[lo:lo + len(a)])
        lo += len(a)
    return out


def cosine_neighbours(vectors, query: int, k: int | None = None, among=None) -> tuple[np.ndarray, np.ndarray]:
    """The points nearest to point ``query`` by cosine similarity in the original space.

    ``vectors`` [N, d]; ``among``: indices (or a boolean mask) of the candidate points, default
    all; the query itself is never its own neighbour. Returns ``(indices, similarities)``, most
    similar first (ties: lower index first), at most ``k`` of them (all when ``k`` is None). A
    zero vector has similarity 0 with everything rather than NaN.
    """
    X = np.asarray(vectors, dtype=np.float64)
    if X.ndim != 2:
        raise XlvizError(f"expected vectors [N, d], got shape {X.shape}", field="vectors")
    n = X.shape[0]
    if not 0 <= int(query) < n:
        raise XlvizError(f"no point {query}; there are {n}", field="point")
    if among is None:
        cand = np.arange(n)
    else:
        a = np.asarray(among)
        cand = np.flatnonzero(a) if a.dtype == bool else a.astype(int).ravel()
    cand = cand[cand != int(query)]
    norms = np.linalg.norm(X, axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    sims = (X[cand] @ X[int(query)]) / (safe[cand] * safe[int(query)])
    sims = np.where((norms[cand] > 0) & (norms[int(query)] > 0), sims, 0.0)
    order = np.lexsort((cand, -sims))  # by similarity descending, then by index
    if k is not None:
        order = order[: max(int(k), 0)]
    return cand[order], sims[order]


def search_mask(texts, query: str) -> np.ndarray:
    """Which texts contain ``query``, ignoring case; the query is literal text (``.``, ``*``,
    ``(`` match themselves), so a user's search never becomes a pattern. An empty (or all-space)
    query matches nothing: nothing is highlighted until the user types."""
    import re

    q = str(query or "").strip()
    if not q:
        return np.zeros(len(texts), dtype=bool)
    pattern = re.compile(re.escape(q), re.IGNORECASE)
    return np.array([pattern.search(str(t)) is not None for t in texts], dtype=bool)
