"""The SQL text of a filter and the error messages that quote it and point at a place with carets."""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.parser import Parser
from sqlglot.tokens import Token


class PredicateDialect(Dialect):
    """sqlglot's default SQL plus backtick-quoted identifiers, which pylance accepts next to "double", and
    binary literals X'616263'."""

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ['"', "`"]
        HEX_STRINGS = [("X'", "'"), ("x'", "'")]


# --------------------------------------------------------------------------------------------------------
# translation


def expression(node: object) -> exp.Expression:
    """`node` as the `exp.Expression` every node of a parsed tree is (sqlglot's newer releases type the trees their
    parser and walks return by the base class `Expr`, which the older ones do not have).

    Args:
        node: a node of a parsed tree
    """
    if not isinstance(node, exp.Expression):
        raise TypeError(f"not a node of a parsed SQL tree: {node!r}")
    return node


class Snippet:
    """The SQL text of a node, rendered only when a message needs it (rendering each node is quadratic).

    Args:
        node: the sqlglot node
        source: the text it was parsed from (None: sqlglot's rendering is quoted)
    """

    __slots__ = ("node", "_source", "_text")

    def __init__(self, node: exp.Expression, source: Source | None = None) -> None:
        """The snippet of `node`."""
        self.node = node
        self._source = source
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:  # the user's own spelling where the node has a place in the text
            span = self._source.span_of(self.node, exact=True) if self._source is not None else None
            if span is not None and self._source is not None:
                text = self._source.text[span[0] : span[1] + 1]
            else:
                text = self.node.sql(dialect=PredicateDialect, normalize_functions=False)
            # a long filter (a key list) is quoted by its start; the caret shows where
            self._text = text if len(text) <= 2 * _SHOWN_AROUND else text[: 2 * _SHOWN_AROUND] + "..."
        return self._text

    def __repr__(self) -> str:
        return repr(str(self))


Text = str | Snippet

# Words that join expressions: a span that starts at "(" does not take one of these as a function name.
_OPERATOR_WORDS = {"AND", "OR", "NOT", "IN", "IS", "LIKE", "ILIKE", "BETWEEN", "ESCAPE", "AS"}
# A long filter (a merge_insert's key list) is shown as this many characters around the error.
_SHOWN_AROUND = 60
_QUOTES = {"'": "string", '"': "quoted column name", "`": "quoted column name"}
# Tokens that need an operand after them: a filter ending with one is missing that operand.
_OPERATOR_TOKENS = frozenset(
    [*Parser.EQUALITY, *Parser.COMPARISON, *Parser.TERM, *Parser.FACTOR, *Parser.CONJUNCTION, *Parser.DISJUNCTION,
     *Parser.BITWISE, *Parser.RANGE_PARSERS, *Parser.UNARY_PARSERS, tokens.TokenType.DPIPE, tokens.TokenType.ESCAPE]
)  # fmt: skip
# An unknown column's message lists at most this many of the table's columns.


class Source:
    """The SQL text of a filter, for errors that quote it and point at a place with carets, as SQL engines do::

        invalid filter 'id >':
          id >
              ^ expected an expression after '>'

    sqlglot records the position of identifiers, literals and function names; the span of any other node
    is that of its leaves, widened to its parentheses, its leading keyword (NOT, CAST, a function name)
    and a trailing IS NULL. A node without leaves (TRUE, NULL) is shown by its parent's span.

    Args:
        text: the SQL text as the user wrote it
    """

    def __init__(self, text: str) -> None:
        """The positions of the nodes of `text`."""
        self.text = text
        self._tokens: list[Token] | None = None

    @property
    def tokens(self) -> list[Token]:
        if self._tokens is None:  # only when an error is reported
            try:
                self._tokens = list(PredicateDialect().tokenize(self.text))
            except (SqlglotError, RecursionError):
                self._tokens = []
        return self._tokens

    # ---- spans

    def span_of(self, node: exp.Expression, exact: bool = False) -> tuple[int, int] | None:
        """The characters (first, last) of `node` in the text, or None when they are not known.

        Leaves without a position (TRUE, NULL, `?`, a type name) are found as the nearest token spelled
        like them before or after the positioned ones. A node with no positioned leaf at all is the first
        token spelled like it from its parent's span on (its parent's span if there is none); with `exact`,
        any leaf not found makes the span unknown (messages then quote sqlglot's rendering of the node).

        Args:
            node: a node parsed from the text
            exact: unknown unless every leaf's position is found
        """
        toks = self.tokens
        order = list(node.dfs())
        placed = [i for i, n in enumerate(order) if "start" in n.meta and "end" in n.meta]
        if not placed:
            if exact or node.parent is None:
                return None
            around = self.span_of(expression(node.parent))
            if around is None:
                return None
            spelled = node.sql(dialect=PredicateDialect).upper()
            same = next((t for t in toks if t.start >= around[0] and t.text.upper() == spelled), None)
            return (same.start, same.end) if same is not None else around
        start = min(order[i].meta["start"] for i in placed)
        end = max(order[i].meta["end"] for i in placed)
        first = next((i for i, t in enumerate(toks) if t.start >= start), None)
        last = next((i for i in range(len(toks) - 1, -1, -1) if toks[i].end <= end), None)
        if first is None or last is None or first > last:
            return None if exact else (start, end)
        for position, leaf in enumerate(order):
            if "start" in leaf.meta or next(leaf.iter_expressions(), None) is not None:
                continue
            if placed[0] < position < placed[-1]:
                continue  # between positioned leaves: inside the span already
            spelled = leaf.sql(dialect=PredicateDialect).upper()
            steps = range(first - 1, -1, -1) if position < placed[0] else range(last + 1, len(toks))
            found = next((j for j in steps if toks[j].text.upper() == spelled), None)
            if found is None and exact:
                return None
            if found is not None:
                first, last = min(first, found), max(last, found)
        first, last = self._balanced(first, last)
        kind = lambda i: toks[i].token_type if 0 <= i < len(toks) else None  # noqa: E731
        in_parens = (kind(first - 1), kind(last + 1)) == (tokens.TokenType.L_PAREN, tokens.TokenType.R_PAREN)
        if isinstance(node, exp.Paren) and in_parens:
            first, last = first - 1, last + 1
        if isinstance(node, exp.Case):  # from CASE to END
            while first > 0 and kind(first) != tokens.TokenType.CASE:
                first -= 1
            while last < len(toks) - 1 and kind(last) != tokens.TokenType.END:
                last += 1
        if isinstance(node, exp.Cast) and in_parens and first >= 2 and kind(first - 2) == tokens.TokenType.VAR:
            first, last = first - 2, last + 1  # CAST( ... )
        if kind(first) == tokens.TokenType.L_PAREN and first > 0:
            before = toks[first - 1].text
            if before[:1].isalpha() and before.upper() not in _OPERATOR_WORDS:
                first -= 1  # a function name or CAST
        if (isinstance(node, exp.Not) and kind(first - 1) == tokens.TokenType.NOT) or (
            isinstance(node, exp.Neg) and kind(first - 1) == tokens.TokenType.DASH
        ):
            first -= 1
        if isinstance(node, exp.Is):
            words = (tokens.TokenType.IS, tokens.TokenType.NOT, tokens.TokenType.NULL, tokens.TokenType.TRUE,
                     tokens.TokenType.FALSE)  # fmt: skip
            while kind(last + 1) in words:
                last += 1
        return toks[first].start, toks[last].end

    def _balanced(self, first: int, last: int) -> tuple[int, int]:
        """Token range [first, last] widened until its parentheses pair up."""
        toks = self.tokens
        depth = lowest = 0
        for t in toks[first : last + 1]:
            depth += {tokens.TokenType.L_PAREN: 1, tokens.TokenType.R_PAREN: -1}.get(t.token_type, 0)
            lowest = min(lowest, depth)
        unopened, unclosed = -lowest, depth - lowest
        while unopened and first > 0:
            first -= 1
            unopened += {tokens.TokenType.L_PAREN: -1, tokens.TokenType.R_PAREN: 1}.get(toks[first].token_type, 0)
        while unclosed and last < len(toks) - 1:
            last += 1
            unclosed += {tokens.TokenType.L_PAREN: 1, tokens.TokenType.R_PAREN: -1}.get(toks[last].token_type, 0)
        return first, last

    def between(self, left: exp.Expression, right: exp.Expression) -> str:
        """The text between two nodes (a binary operator), or "" when either has no position.

        Args:
            left: the left operand
            right: the right operand
        """
        first, second = self.span_of(left), self.span_of(right)
        if first is None or second is None or first[1] >= second[0]:
            return ""
        return self.text[first[1] + 1 : second[0]].strip()

    def statement_break(self) -> tuple[int, int] | None:
        """Where a second statement starts: the first `;`."""
        semicolon = next((t for t in self.tokens if t.token_type == tokens.TokenType.SEMICOLON), None)
        return None if semicolon is None else (semicolon.start, semicolon.end)

    # ---- syntax errors, in plain words

    def unreadable(self) -> tuple[str, tuple[int, int] | None]:
        """The problem of a text sqlglot cannot split into tokens: an unclosed quote, else a generic one."""
        quote, opened, at = None, None, 0
        while at < len(self.text):
            char = self.text[at]
            if quote is None and char in _QUOTES:
                quote, opened = char, at
            elif quote is not None and char == quote:
                if self.text[at + 1 : at + 2] == quote:  # a doubled quote stands for itself
                    at += 1
                else:
                    quote = None
            at += 1
        if quote is not None and opened is not None:
            what = _QUOTES[quote]
            return f"unterminated {what}: the {quote} here is never closed", (opened, len(self.text) - 1)
        return "the text cannot be read as SQL", None

    def syntax_error(self, details: dict[str, Any]) -> tuple[str, tuple[int, int] | None]:
        """sqlglot's parse error `details` as a problem in plain words and the span it points at.

        Args:
            details: one entry of sqlglot's `ParseError.errors`
        """
        description = str(details.get("description") or "syntax error")
        found = self._token_at(details.get("line"), details.get("col"))
        toks = self.tokens
        index = toks.index(found) if found is not None else None
        at_end = index is not None and index == len(toks) - 1
        after_end = (len(self.text.rstrip()), len(self.text.rstrip()))  # just past the last character
        here = (found.start, found.end) if found is not None else None
        text = found.text if found is not None else ""
        missing = re.match(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description)
        if missing:
            key, cls = missing.group(1), getattr(exp, missing.group(2), None)
            if cls is exp.Between:
                return (
                    "BETWEEN needs a lower and an upper bound (x BETWEEN low AND high)",
                    after_end if at_end else here,
                )
            if cls is not None and issubclass(cls, exp.Func) and text == ")":
                return f"{cls.sql_names()[0].lower() if cls.sql_names() else cls.key}() needs an argument", here
            if cls is exp.Column:
                return f"expected a field name after {text!r}", after_end if at_end else here
            if key == "this" and cls is not None and issubclass(cls, exp.Binary) and toks:
                return f"expected an expression before {toks[0].text!r}", (toks[0].start, toks[0].end)
            if index is None or (at_end and found is not None and found.token_type in _OPERATOR_TOKENS):
                return f"expected an expression after {text!r}", after_end
            if index == 0:
                return f"unexpected {text!r}", here
            return f"expected an expression after {toks[index - 1].text!r}, found {text!r}", here
        if description.startswith("Expecting )"):
            opening = self._unclosed_paren()
            where = f" to close the '(' at column {opening.start + 1}" if opening is not None else ""
            if at_end:
                return f"missing ')'{where}", after_end
            following = toks[index + 1] if index is not None and index + 1 < len(toks) else found
            assert following is not None
            return f"expected ')'{where}, found {following.text!r}", (following.start, following.end)
        if description.startswith("Invalid expression / Unexpected token"):
            if text == ")":
                return "unexpected ')': there is no '(' to close", here
            return f"unexpected {text!r} after a complete expression", here
        if description.startswith("Expected TYPE after CAST"):
            return "expected a type after AS, as in CAST(x AS BIGINT)", here
        plain = re.sub(r"<class '[\w.]*?(\w+)'>", lambda m: m.group(1).upper(), description)
        return f"syntax error: {plain}", here

    def _token_at(self, line: int | None, col: int | None) -> Token | None:
        """The token sqlglot's error names by its line and the (1-based) column of its last character."""
        if line is None or col is None:
            return None
        lines = self.text.split("\n")
        offset = sum(len(x) + 1 for x in lines[: line - 1]) + col - 1
        return next((t for t in self.tokens if t.start <= offset <= t.end), None)

    def _unclosed_paren(self) -> Token | None:
        stack: list[Token] = []
        for t in self.tokens:
            if t.token_type == tokens.TokenType.L_PAREN:
                stack.append(t)
            elif t.token_type == tokens.TokenType.R_PAREN and stack:
                stack.pop()
        return stack[-1] if stack else None

    # ---- the message

    def render(self, header: str, problem: str, span: tuple[int, int] | None, context: str = "") -> str:
        """`header`, the quoted text and `context`, then the line of `span` with carets under it and `problem`.

        Args:
            header: what was invalid (`invalid filter`)
            problem: what is wrong, in words
            span: the characters (first, last) pointed at (None: none)
            context: added after the quoted text (` for column 'x'`)
        """
        short = len(self.text) <= 2 * _SHOWN_AROUND
        quoted = repr(self.text) if short else repr(self.text[: 2 * _SHOWN_AROUND] + "...")
        if span is None or not self.text.strip():
            return f"{header} {quoted}{context}: {problem}"
        start, end = span
        line_start = self.text.rfind("\n", 0, start) + 1
        line_end = self.text.find("\n", start)
        line_end = len(self.text) if line_end < 0 else line_end
        end = max(start, min(end, line_end - 1, start + 2 * _SHOWN_AROUND))
        shown_from = max(line_start, start - _SHOWN_AROUND)
        shown_to = min(line_end, max(end + 1, start + 1) + _SHOWN_AROUND)
        shown = self.text[shown_from:shown_to]
        lead = "..." if shown_from > line_start else ""
        tail = "..." if shown_to < line_end else ""
        before = lead + self.text[shown_from:start]
        pad = "".join("\t" if c == "\t" else " " for c in before)
        line_number = self.text.count("\n", 0, start) + 1
        where = f" (line {line_number})" if "\n" in self.text else ""
        carets = "^" * (end - start + 1 if start < line_end else 1)
        return f"{header} {quoted}{context}{where}:\n  {lead}{shown}{tail}\n  {pad}{carets} {problem}"
