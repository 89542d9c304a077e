"""Type stubs of the Rust module behind `slide` (use the `slide` package's API instead)."""

from typing import Any, Optional, Sequence

def read_xmc(path: str) -> tuple[int, int, list[bytes]]: ...
def shipped_config(name: str) -> Optional[str]: ...
def shipped_configs() -> list[str]: ...
def kernels() -> str: ...

class Model:
    @staticmethod
    def fit(
        text: str,
        path: str,
        overrides: Sequence[str],
        x: tuple[Any, Any, Any, int],
        y: tuple[Any, Any, int],
        validation: Optional[tuple[tuple[Any, Any, Any], tuple[Any, Any]]],
        out: str,
        verbose: bool,
        threads: Optional[int],
    ) -> "Model": ...
    def partial_fit(
        self,
        overrides: Sequence[str],
        x: tuple[Any, Any, Any, int],
        y: tuple[Any, Any, int],
        validation: Optional[tuple[tuple[Any, Any, Any], tuple[Any, Any]]],
        out: str,
        verbose: bool,
        threads: Optional[int],
    ) -> None: ...
    def predict(
        self, x: tuple[Any, Any, Any, int], k: int, mode: Optional[str], threads: Optional[int]
    ) -> tuple[bytes, bytes]: ...
    def score(
        self,
        x: tuple[Any, Any, Any, int],
        y: tuple[Any, Any, int],
        mode: Optional[str],
        threads: Optional[int],
        train_counts: Optional[tuple[list[int], int]],
    ) -> dict[str, float]: ...
    def save(self, dir: str) -> str: ...
    @staticmethod
    def load(path: str, text: Optional[str], config_path: str, overrides: Sequence[str]) -> "Model": ...
    @property
    def features(self) -> int: ...
    @property
    def labels(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def config_text(self) -> str: ...
    @property
    def last_eval(self) -> Optional[dict[str, float]]: ...
