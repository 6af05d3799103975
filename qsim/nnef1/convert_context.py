"""What a conversion (convert*.py) sees of the NNEF 1.0 composition: the composer, the operation
being converted, where it was invoked, and the graph being built."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Location, SemanticError, UnsupportedError
from .builder import DocumentGraphBuilder, TensorValue


@dataclass
class ConvertContext:
    """What a conversion sees: the composer, the operation, where it was invoked."""
    composer: Any          # the nnef1.compose.Composer converting (it imports the conversions)
    op: str
    loc: Location
    hint: str
    generic: str | None

    @property
    def builder(self) -> DocumentGraphBuilder:
        return self.composer.builder

    def fail(self, message: str, hint: str | None = None, unsupported: bool = False):
        cls = UnsupportedError if unsupported else SemanticError
        raise cls(f"{self.op}: {message}", location=self.loc, hint=hint)

    def emit(self, kind: str, inputs, attrs: dict, outputs) -> list[TensorValue]:
        """outputs: list of (item, shape); tensors are named after the statement."""
        return self.builder.op(kind, inputs, attrs,
                               [(f"{self.hint}.{self.op}", item, shape) for item, shape in outputs],
                               label=self.hint)
