"""slide: extreme classification with SLIDE-style LSH-sampled sparse networks, on CPUs.

Train from SciPy/NumPy in a few lines::

    import slide
    X, Y = slide.read_xmc("train.txt")          # scipy.sparse CSR matrices
    Xt, Yt = slide.read_xmc("test.txt")
    model = slide.Classifier(epochs=2).fit(X, Y)  # configs/xmc.toml, embedded
    labels, scores = model.predict(Xt, k=5)     # (n, 5) arrays, best first
    print(model.score(Xt, Yt))                  # {'p@1': ..., 'ndcg@5': ..., 'psp@5': ...}
    model.save("my-model")                      # a slide-train checkpoint and its config

The training loop is `slide-train`'s own (the same P@1 for the same data, config and
seed), run in Rust with the GIL released; errors carry the CLI's messages.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from typing import Any, Iterator, Optional, Union

import numpy as np
import scipy.sparse as sp

from . import _slide
from ._slide import kernels, shipped_configs

__all__ = ["Classifier", "load", "read_xmc", "write_xmc", "kernels", "shipped_configs"]

PathLike = Union[str, "os.PathLike[str]"]


def read_xmc(path: PathLike) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Reads an XMC text file (``N D L`` header; gzip or not) with slide's reader.

    Returns ``(X, Y)``: the features as a float32 CSR matrix of shape ``(N, D)`` and the
    labels as a CSR matrix of ones of shape ``(N, L)``. A malformed file raises
    ``ValueError`` naming the file, the line and the problem.
    """
    features, labels, parts = _slide.read_xmc(os.fspath(path))
    indptr = np.frombuffer(parts[0], dtype=np.uint64).astype(np.int64)
    indices = np.frombuffer(parts[1], dtype=np.uint32).astype(np.int32)
    values = np.frombuffer(parts[2], dtype=np.float32)
    label_indptr = np.frombuffer(parts[3], dtype=np.uint64).astype(np.int64)
    label_ids = np.frombuffer(parts[4], dtype=np.uint32).astype(np.int32)
    rows = len(indptr) - 1
    x = sp.csr_matrix((values, indices, indptr), shape=(rows, features))
    ones = np.ones(len(label_ids), dtype=np.float32)
    y = sp.csr_matrix((ones, label_ids, label_indptr), shape=(rows, labels))
    return x, y


def write_xmc(path: PathLike, X: Any, Y: Any) -> None:
    """Writes ``X`` (a sparse or dense matrix) and ``Y`` (a CSR label matrix or a list of
    label lists) as an XMC text file that ``read_xmc`` and ``slide-train`` read. The file is
    written under a temporary name and renamed, so a partial file never has ``path``'s name.
    """
    x = _csr_inputs(X)
    y = _csr_labels(Y, None, x.shape[0])
    path = os.fspath(path)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="ascii") as out:
        out.write(f"{x.shape[0]} {x.shape[1]} {y.shape[1]}\n")
        for i in range(x.shape[0]):
            labels = ",".join(str(l) for l in y.indices[y.indptr[i] : y.indptr[i + 1]])
            start, end = x.indptr[i], x.indptr[i + 1]
            pairs = " ".join(
                f"{j}:{v:.9g}" for j, v in zip(x.indices[start:end], x.data[start:end])
            )
            out.write(f"{labels} {pairs}\n" if pairs else f"{labels}\n")
    os.replace(temporary, path)


def _csr_inputs(X: Any) -> sp.csr_matrix:
    """``X`` as CSR with sorted, unique column ids, copied only when it must change."""
    if sp.issparse(X):
        x = X.tocsr()
    else:
        array = np.asarray(X)
        if array.ndim != 2:
            raise ValueError(f"X must be a 2-D array or a sparse matrix, got {array.ndim} dimensions")
        x = sp.csr_matrix(array, dtype=np.float32)
    if not x.has_canonical_format:
        x = x.copy()
        x.sum_duplicates()
    return x


def _csr_labels(Y: Any, labels: Optional[int], rows: int) -> sp.csr_matrix:
    """``Y`` (a sparse label matrix, or one list of label ids per row) as CSR."""
    if sp.issparse(Y):
        y = Y.tocsr()
        if labels is not None and y.shape[1] != labels:
            raise ValueError(f"Y has {y.shape[1]} labels but the model has {labels}")
        return y
    rows_of_labels = [np.asarray(list(r), dtype=np.int64) for r in Y]
    if len(rows_of_labels) != rows:
        raise ValueError(f"X has {rows} rows but Y has {len(rows_of_labels)}")
    ids = np.concatenate(rows_of_labels) if rows_of_labels else np.zeros(0, np.int64)
    if ids.size and ids.min() < 0:
        raise ValueError(f"Y: label {ids.min()} is negative")
    count = labels if labels is not None else (int(ids.max()) + 1 if ids.size else 1)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows_of_labels])]).astype(np.int64)
    ones = np.ones(len(ids), dtype=np.float32)
    return sp.csr_matrix((ones, ids, indptr), shape=(rows, count))


def _validation(X_val: Any, Y_val: Any, labels: int, features: Optional[int]) -> Optional[tuple]:
    """The validation arrays as the extension takes them (``None`` without them), ``Y_val``
    with ``labels`` labels and, given ``features``, ``X_val`` with that many features."""
    if X_val is None and Y_val is None:
        return None
    if X_val is None or Y_val is None:
        raise ValueError("give both X_val and Y_val, or neither")
    xv = _csr_inputs(X_val)
    yv = _csr_labels(Y_val, labels, xv.shape[0])
    if features is not None and xv.shape[1] != features:
        raise ValueError(f"X_val has {xv.shape[1]} features but X has {features}")
    return ((xv.indptr, xv.indices, xv.data), (yv.indptr, yv.indices))


def _parts(x: sp.csr_matrix) -> tuple:
    return (x.indptr, x.indices, x.data, x.shape[1])


def _toml(value: Any) -> str:
    """A Python value as a TOML value (for ``section.key=value`` overrides)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise ValueError(f"cannot write {value!r} as a config value")


def _config(config: Optional[PathLike]) -> tuple[str, str]:
    """A config's text and the name errors give it: a file, a shipped config's name, or
    (``None``) the shipped ``xmc.toml``."""
    name = "xmc.toml" if config is None else os.fspath(config)
    if config is not None and os.path.exists(name):
        with open(name, encoding="utf-8") as f:
            return f.read(), name
    text = _slide.shipped_config(os.path.basename(name))
    if text is None:
        shipped = ", ".join(shipped_configs())
        raise ValueError(f"{name}: no such file, and not a shipped config ({shipped})")
    return text, os.path.join("configs", os.path.basename(name))


class Classifier:
    """A slide network for multi-label (or multi-class) classification.

    ``config`` is a TOML file, the name of a shipped config (``"amazon670k.toml"``) or
    ``None`` for the shipped ``xmc.toml`` (its output size comes from the labels). Keyword
    arguments set ``[train]`` keys (``epochs=2``, ``lr=0.001``, ``seed=7``, ...); ``set``
    takes any ``"section.key"`` (``{"network.layers.0.size": 256}``), as
    ``slide-train --set`` does. ``threads`` (default: one per core), ``verbose`` (progress
    and evaluation lines) and ``out`` (a folder for the metrics file and any checkpoints;
    default: a temporary one, removed after ``fit``) are not config keys.
    """

    def __init__(
        self,
        config: Optional[PathLike] = None,
        *,
        threads: Optional[int] = None,
        verbose: bool = True,
        out: Optional[PathLike] = None,
        set: Optional[dict] = None,
        **overrides: Any,
    ) -> None:
        self.config = config
        self.threads = threads
        self.verbose = verbose
        self.out = out
        self.set = dict(set or {})
        self.overrides = overrides
        self._model: Optional[_slide.Model] = None

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's arguments (scikit-learn's convention)."""
        return {
            "config": self.config,
            "threads": self.threads,
            "verbose": self.verbose,
            "out": self.out,
            "set": dict(self.set),
            **self.overrides,
        }

    def set_params(self, **params: Any) -> "Classifier":
        """Changes constructor arguments; unknown names become ``[train]`` keys."""
        for key, value in params.items():
            if key in ("config", "threads", "verbose", "out", "set"):
                setattr(self, key, value)
            else:
                self.overrides[key] = value
        return self

    def _override_lines(self, epochs: Optional[int]) -> list[str]:
        lines = ["checkpoint.at_end=false"]
        lines += [f"train.{k}={_toml(v)}" for k, v in self.overrides.items()]
        lines += [f"{k}={_toml(v)}" for k, v in self.set.items()]
        if epochs is not None:
            lines.append(f"train.epochs={_toml(epochs)}")
        return lines

    def fit(
        self,
        X: Any,
        Y: Any,
        X_val: Any = None,
        Y_val: Any = None,
        epochs: Optional[int] = None,
    ) -> "Classifier":
        """Trains a new network on ``X`` (``(n, features)``, sparse or dense) and ``Y`` (a
        CSR label matrix or ``n`` lists of label ids), evaluating on ``(X_val, Y_val)`` after
        each epoch (and every ``eval_every`` steps) when given. Ctrl-C stops it after the
        step in progress: the model trained so far is kept, then ``KeyboardInterrupt`` is
        raised. Returns ``self``."""
        x = _csr_inputs(X)
        y = _csr_labels(Y, None, x.shape[0])
        validation = _validation(X_val, Y_val, y.shape[1], x.shape[1])
        text, name = _config(self.config)
        with self._folder() as out:
            try:
                self._model = _slide.Model.fit(
                    text,
                    name,
                    self._override_lines(epochs),
                    _parts(x),
                    (y.indptr, y.indices, y.shape[1]),
                    validation,
                    out,
                    self.verbose,
                    self.threads,
                )
            except KeyboardInterrupt as stop:
                if len(stop.args) == 2 and isinstance(stop.args[1], _slide.Model):
                    self._model = stop.args[1]
                    raise KeyboardInterrupt(stop.args[0]) from None
                raise
        return self

    def partial_fit(
        self,
        X: Any,
        Y: Any,
        X_val: Any = None,
        Y_val: Any = None,
        epochs: Optional[int] = None,
    ) -> "Classifier":
        """Continues the trained model (from ``fit``, an earlier ``partial_fit`` or
        ``slide.load``) on ``X`` and ``Y``, as ``slide-train --init-from`` does: a new run of
        its config (``epochs`` and the keyword arguments as in ``fit``) from its weights,
        tables and optimizer state. ``Y`` may have more label columns than the model has
        labels: the output layer grows by them (new labels need samples here). ``X`` may not
        have more features than the model reads. To keep what it knows of the old labels,
        pass a share of the old samples with the new ones (``scipy.sparse.vstack``).
        Returns ``self``; an untrained Classifier is trained with ``fit``."""
        if self._model is None:
            return self.fit(X, Y, X_val, Y_val, epochs)
        x = _csr_inputs(X)
        y = _csr_labels(Y, None, x.shape[0])
        if y.shape[1] < self._model.labels and not sp.issparse(Y):
            # Label lists name no column past their largest label: the model's others.
            y.resize((y.shape[0], self._model.labels))
        labels = max(self._model.labels, y.shape[1])
        y = _csr_labels(y, labels, x.shape[0])
        validation = _validation(X_val, Y_val, labels, None)
        with self._folder() as out:
            self._model.partial_fit(
                self._override_lines(epochs),
                _parts(x),
                (y.indptr, y.indices, y.shape[1]),
                validation,
                out,
                self.verbose,
                self.threads,
            )
        return self

    @contextlib.contextmanager
    def _folder(self) -> Iterator[str]:
        """The run's folder: ``out``, or a temporary one removed afterwards."""
        out = os.fspath(self.out) if self.out is not None else tempfile.mkdtemp(prefix="slide-")
        try:
            yield out
        finally:
            if self.out is None:
                shutil.rmtree(out, ignore_errors=True)

    def _fitted(self) -> "_slide.Model":
        if self._model is None:
            raise ValueError("this Classifier is not trained yet: call fit first, or slide.load")
        return self._model

    def predict(
        self, X: Any, k: int = 5, mode: Optional[str] = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each row's ``k`` best labels (1 to the label count: 5 for P@k, tens to hundreds
        for a re-ranker's shortlist) and their scores (logits), best first: ``(labels,
        scores)``, arrays of shape ``(n, k)`` (uint32, float32). ``mode``: ``"exact"`` scores
        every label; ``"lsh"`` only those the hash tables pick (faster, approximate; a row
        with fewer than ``k`` picks is padded with label 2**32 - 1 and score -inf);
        ``"dense"`` computes every neuron of every layer; ``None`` (the default), the
        config's ``eval_mode``."""
        model = self._fitted()
        x = _csr_inputs(X)
        ids, scores = model.predict(_parts(x), k, mode, self.threads)
        n = x.shape[0]
        return (
            np.frombuffer(ids, dtype=np.uint32).reshape(n, k),
            np.frombuffer(scores, dtype=np.float32).reshape(n, k),
        )

    def score(self, X: Any, Y: Any, mode: Optional[str] = None, Y_train: Any = None) -> dict:
        """The extreme-classification metrics of the rows of ``X`` against their labels
        ``Y``, at k = 1, 3, 5, and the number of rows: a dict with keys ``"p@1"``, ``"p@3"``,
        ``"p@5"`` (precision), ``"ndcg@1"`` ... ``"ndcg@5"``, and the propensity-scored
        ``"psp@1"`` ... ``"psp@5"`` and ``"psndcg@1"`` ... ``"psndcg@5"`` (Jain et al. 2016,
        computed as the Extreme Classification Repository's tools compute them, with the
        config's ``propensity_a`` and ``propensity_b``), and ``"samples"``. The propensities
        come from ``Y_train``'s label counts when given, else from the labels ``fit`` saw; a
        model from ``slide.load`` reports them only with ``Y_train``. ``mode`` as for
        ``predict``."""
        model = self._fitted()
        x = _csr_inputs(X)
        y = _csr_labels(Y, model.labels, x.shape[0])
        counts = None
        if Y_train is not None:
            rows = Y_train.shape[0] if sp.issparse(Y_train) else len(Y_train)
            yt = _csr_labels(Y_train, model.labels, rows)
            per_label = np.bincount(yt.indices, minlength=model.labels)
            counts = ([int(c) for c in per_label], yt.shape[0])
        return model.score(
            _parts(x), (y.indptr, y.indices, y.shape[1]), mode, self.threads, counts
        )

    @property
    def last_eval(self) -> Optional[dict]:
        """The metrics of the last evaluation ``fit`` ran on its validation data (as
        ``score`` names them), or ``None`` when it had none."""
        return self._fitted().last_eval

    def save(self, path: PathLike) -> str:
        """Writes the model into the folder ``path``: ``config.toml`` and a checkpoint that
        ``slide-train eval --config PATH/config.toml --checkpoint PATH`` reads. Returns the
        checkpoint's path."""
        return os.fspath(self._fitted().save(os.fspath(path)))

    @property
    def n_features(self) -> int:
        """Input dimension of the trained model."""
        return self._fitted().features

    @property
    def n_labels(self) -> int:
        """Number of labels of the trained model."""
        return self._fitted().labels

    @property
    def config_text(self) -> str:
        """The trained model's config, every override applied (what ``save`` writes)."""
        return self._fitted().config_text


def load(
    path: PathLike,
    config: Optional[PathLike] = None,
    *,
    threads: Optional[int] = None,
    set: Optional[dict] = None,
) -> Classifier:
    """A model saved by ``Classifier.save`` or by ``slide-train``: ``path`` is a checkpoint
    file or a folder (its newest checkpoint). The config is ``config`` when given (needed
    for a ``slide-train`` run's checkpoints), else the folder's ``config.toml``."""
    text = None
    name = ""
    if config is not None:
        text, name = _config(config)
    overrides = [f"{k}={_toml(v)}" for k, v in (set or {}).items()]
    model = _slide.Model.load(os.fspath(path), text, name, overrides)
    classifier = Classifier(config, threads=threads)
    classifier._model = model
    return classifier
