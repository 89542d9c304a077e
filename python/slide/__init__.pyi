"""Type stubs of the `slide` package (the docstrings are in `__init__.py`)."""

import os
from typing import Any, Optional, Union

import numpy as np
import scipy.sparse as sp

PathLike = Union[str, os.PathLike[str]]

def read_xmc(path: PathLike) -> tuple[sp.csr_matrix, sp.csr_matrix]: ...
def write_xmc(path: PathLike, X: Any, Y: Any) -> None: ...
def kernels() -> str: ...
def shipped_configs() -> list[str]: ...

class Classifier:
    config: Optional[PathLike]
    threads: Optional[int]
    verbose: bool
    out: Optional[PathLike]
    set: dict[str, Any]
    overrides: dict[str, Any]
    def __init__(
        self,
        config: Optional[PathLike] = ...,
        *,
        threads: Optional[int] = ...,
        verbose: bool = ...,
        out: Optional[PathLike] = ...,
        set: Optional[dict[str, Any]] = ...,
        **overrides: Any,
    ) -> None: ...
    def get_params(self, deep: bool = ...) -> dict[str, Any]: ...
    def set_params(self, **params: Any) -> "Classifier": ...
    def fit(
        self, X: Any, Y: Any, X_val: Any = ..., Y_val: Any = ..., epochs: Optional[int] = ...
    ) -> "Classifier": ...
    def predict(self, X: Any, k: int = ..., mode: str = ...) -> tuple[np.ndarray, np.ndarray]: ...
    def score(self, X: Any, Y: Any, mode: str = ...) -> dict[str, float]: ...
    def save(self, path: PathLike) -> str: ...
    @property
    def n_features(self) -> int: ...
    @property
    def n_labels(self) -> int: ...
    @property
    def config_text(self) -> str: ...

def load(
    path: PathLike,
    config: Optional[PathLike] = ...,
    *,
    threads: Optional[int] = ...,
    set: Optional[dict[str, Any]] = ...,
) -> Classifier: ...
