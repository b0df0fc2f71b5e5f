"""ListOps: nested list operations whose value is the label (Nangia & Bowman, 2018).

An expression such as ``[MAX 4 3 [MIN 2 3 ] 1 0 [MED 1 5 8 9 2 ] ]`` applies MAX, MIN, MED
(median) and SM (sum modulo 10) to digits and to the values of nested expressions; a model
reads the tokens and names the value, one of 10 classes. Solving it means tracking the
nesting across the whole sequence, which is why Long Range Arena (Tay et al. 2021) uses it.

:func:`generate_listops` draws expressions by the rules of LRA's generator
(``lra_benchmarks/data/listops.py``, ``generate_tree``), :func:`evaluate_listops` parses
tokens back and computes their value, and :func:`apply_operator` is the one place that
defines what each operator means. The recipes built on them are in :mod:`selfattn.data.recipes.lra`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from selfattn.datatypes import Example

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
DIGITS = tuple(str(d) for d in range(10))
#: LRA's ``VALUE_P``: a node above the depth limit is an operator with this probability.
OPERATOR_P = 0.25
#: Rejected draws in a row after which a spec is taken to be unsatisfiable (LRA's needs
#: about 12 draws per expression, ``SHORT_LISTOPS`` about 9).
MAX_MISSES = 100_000


@dataclass(frozen=True)
class ListOpsSpec:
    """How ListOps expressions are drawn, and how many per split.

    Attributes:
        min_length: fewest tokens an expression may have (inclusive).
        max_length: most tokens an expression may have (inclusive).
        max_depth: a node at this depth is always a digit (the root is depth 1), so an
            expression nests at most ``max_depth - 1`` brackets.
        max_args: most arguments of one operator (the fewest is 2).
        sizes: expressions in train, dev and test.
    """

    min_length: int
    max_length: int
    max_depth: int = 10
    max_args: int = 10
    sizes: tuple[int, int, int] = (20_000, 1_000, 1_000)

    def __post_init__(self) -> None:
        if not 1 <= self.min_length <= self.max_length:
            raise ValueError(f"need 1 ≤ min_length ≤ max_length, got {self}")
        if self.max_depth < 1 or self.max_args < 2 or min(self.sizes) < 0:
            raise ValueError(f"need max_depth ≥ 1, max_args ≥ 2, sizes ≥ 0, got {self}")


#: LRA's window (``500 < L < 2000``) with CPU-sized splits (LRA: 96,000 / 2,000 / 2,000).
LRA_LISTOPS = ListOpsSpec(min_length=501, max_length=1999)
#: LRA's splits sizes, for ``dataclasses.replace(LRA_LISTOPS, sizes=LRA_LISTOPS_SIZES)``.
LRA_LISTOPS_SIZES = (96_000, 2_000, 2_000)
#: The same rules for short sequences, where a CPU can afford full attention. Depth 6 (at
#: most 5 nested brackets): at LRA's 10, 87 % of 64-256-token expressions nest 9 deep,
#: LRA's deepest nesting packed into an eighth of its length, and take 8 × as long to draw.
SHORT_LISTOPS = ListOpsSpec(min_length=64, max_length=256, max_depth=6)


def apply_operator(operator: str, args: Sequence[int]) -> int:
    """The value of one ListOps operator applied to its (already evaluated) arguments.

    MED is LRA's ``int(np.median(args))``: for an even count, the mean of the two middle
    values rounded down (``[MED 1 4 ]`` is 2, neither middle value).
    """
    if operator == MIN:
        return min(args)
    if operator == MAX:
        return max(args)
    if operator == MED:
        ordered = sorted(args)
        half = len(ordered) // 2
        return ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) // 2
    if operator == SUM_MOD:
        return sum(args) % 10
    raise ValueError(f"unknown ListOps operator {operator!r}")


def evaluate_listops(tokens: Sequence[str]) -> int:
    """Parse and evaluate a ListOps expression given as tokens.

    Args:
        tokens: e.g. ``"[MAX 4 3 [MIN 2 3 ] 1 ]".split()``.

    Raises:
        ValueError: not exactly one well-formed expression (unknown token, unbalanced
            ``]``, an operator without arguments, or trailing tokens).
    """
    stack: list[tuple[str, list[int]]] = []  # open operators and the values seen so far
    result: int | None = None
    for position, token in enumerate(tokens):
        if result is not None:
            raise ValueError(f"token {position} ({token!r}) follows a complete expression")
        if token in OPERATORS:
            stack.append((token, []))
            continue
        if token == END:
            if not stack or not stack[-1][1]:
                raise ValueError(f"token {position}: ']' closes no operator with arguments")
            operator, args = stack.pop()
            value = apply_operator(operator, args)
        elif token in DIGITS:
            value = int(token)
        else:
            raise ValueError(f"token {position}: unknown ListOps token {token!r}")
        if stack:
            stack[-1][1].append(value)
        else:
            result = value
    if result is None:
        raise ValueError("incomplete ListOps expression" if stack else "empty expression")
    return result


class _TooLong(Exception):
    """An expression outgrew the length window: give up on it early."""


def _operator(draw: Callable[[], float], depth: int, spec: ListOpsSpec, out: list[str]) -> int:
    """Append a random operator node at ``depth`` (its whole subtree) to ``out``; its value.

    LRA's ``generate_tree``: 2 … ``max_args`` arguments (uniform), each an operator with
    probability ``OPERATOR_P`` while below ``max_depth``, else a uniform digit. Digits
    are made here rather than by a call of their own, which halves the time.
    """
    operator = OPERATORS[int(draw() * len(OPERATORS))]
    out.append(operator)
    args = []
    digits_only = depth + 1 >= spec.max_depth
    for _ in range(2 + int(draw() * (spec.max_args - 1))):
        if digits_only or draw() >= OPERATOR_P:
            digit = int(draw() * 10)
            out.append(DIGITS[digit])
            args.append(digit)
        else:
            args.append(_operator(draw, depth + 1, spec, out))
        if len(out) >= spec.max_length:  # no room left for this operator's "]"
            raise _TooLong
    out.append(END)
    return apply_operator(operator, args)


def _expression(draw: Callable[[], float], spec: ListOpsSpec) -> tuple[list[str], int] | None:
    """A random expression's tokens and value, or None when it outgrew ``max_length``."""
    if spec.max_depth <= 1 or draw() >= OPERATOR_P:  # the root is a digit
        digit = int(draw() * 10)
        return [DIGITS[digit]], digit
    out: list[str] = []
    try:
        return out, _operator(draw, 1, spec, out)
    except _TooLong:
        return None


def generate_listops(
    spec: ListOpsSpec,
    size: int,
    seed: str | int,
    *,
    exclude: set[tuple[str, ...]] | None = None,
    name: str = "listops",
) -> list[Example]:
    """``size`` distinct random expressions with ``spec.min_length`` … ``max_length`` tokens.

    Args:
        spec: the drawing rules (its ``sizes`` are not used here).
        size: the number of expressions.
        seed: seeds :class:`random.Random`; only its ``random()`` is used, whose sequence
            Python keeps the same across versions for a given seed.
        exclude: expressions not to draw (another split's); the new ones are added to it.
        name: prefix of each example's ``source`` (``name[i]``).

    Returns:
        Examples whose tokens are the expression and whose label is its value, ``"0"`` …
        ``"9"``.

    Raises:
        ValueError: ``MAX_MISSES`` draws in a row were too short, too long or seen.
    """
    draw = random.Random(seed).random
    seen = exclude if exclude is not None else set()
    examples: list[Example] = []
    misses = 0  # draws in a row that were rejected
    while len(examples) < size:
        drawn = _expression(draw, spec)
        tokens = () if drawn is None else tuple(drawn[0])
        if drawn is None or len(tokens) < spec.min_length or tokens in seen:
            misses += 1
            if misses > MAX_MISSES:
                raise ValueError(f"{spec} yields no new expression in {MAX_MISSES:,} draws")
            continue
        misses, value = 0, drawn[1]
        seen.add(tokens)
        examples.append(Example(tokens, None, DIGITS[value], f"{name}[{len(examples)}]"))
    return examples
