"""The header of an MLGO training log: its feature, score and advice specs."""

from __future__ import annotations

from dataclasses import dataclass

from .._native import core

TensorSpec = core().TensorSpec


@dataclass(frozen=True)
class LogHeader:
    """The specs of a log: its features, and its score and advice if any."""

    features: tuple[TensorSpec, ...]
    score: TensorSpec | None = None
    advice: TensorSpec | None = None

    def to_json(self) -> str:
        """The header line as LLVM writes it (without the newline)."""
        parts = ['{"features":[' + ",".join(s.to_json() for s in self.features) + "]"]
        if self.score is not None:
            parts.append('"score":' + self.score.to_json())
        if self.advice is not None:
            parts.append('"advice":' + self.advice.to_json())
        return ",".join(parts) + "}"

