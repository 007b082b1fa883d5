"""The translated value of the SQL translator (`sql_translator.Translator`) and its function helpers
(`sql_functions`), and what those helpers use of the translator (`TranslatorHost`): both modules import this one,
so the helpers name the translator without importing it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvcc_core.errors import PredicateError
from mvcc_core.read.sql_source import Snippet, Text


@dataclass(frozen=True)
class Value:
    """A translated sub-expression with its Arrow type; ``const`` is set when it folded to a scalar."""

    expr: pc.Expression
    type: pa.DataType
    sql: Text
    const: pa.Scalar | None = None
    text: str | None = None  # a numeric literal's spelling, for exact comparisons with decimal columns

    @property
    def is_const(self) -> bool:
        return self.const is not None

    @property
    def scalar(self) -> pa.Scalar:
        """The scalar a constant folded to (`const`, for a value the caller knows `is_const`)."""
        if self.const is None:
            raise TypeError(f"{self.sql} is not a constant")
        return self.const


class TranslatorHost(Protocol):
    """What the function helpers use of a `Translator` (each member is the `Translator` one; see there)."""

    def fail(self, problem: str, at: Text | exp.Expression | tuple[int, int] | None = None) -> PredicateError:
        """The error for the text translated, pointing at `at`.

        Args:
            problem: what is wrong, in words
            at: where in the text: a node, its snippet, or a character span (first, last); None: nowhere
        """
        ...

    def visit(self, node: exp.Expression, positive: bool = False) -> Value:
        """The translation of one node.

        Args:
            node: a sqlglot node of the text
            positive: only AND/OR lie between it and the root
        """
        ...

    def _unsupported(self, node: exp.Expression) -> PredicateError: ...

    def _const(self, scalar: pa.Scalar, sql: Text, text: str | None = None) -> Value: ...

    def _call(self, function: str, args: list[Value], sql: Text, **options: Any) -> Value: ...

    def _decoded(self, value: Value) -> Value: ...

    def _sql(self, node: exp.Expression) -> Snippet: ...
