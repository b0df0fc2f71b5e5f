"""A bad decoding argument is a one-line ValueError that names it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from selfattn.decoding import beam_search, greedy, non_autoregressive, sample

CASES: list[tuple[Callable[..., Any], dict[str, Any], str]] = [
    (greedy, {"max_len": 0}, "max_len"),
    (greedy, {"max_len": 17}, "max_len"),  # the tiny model's max_len is 16
    (greedy, {"max_len": 5, "min_len": 6}, "min_len"),
    (greedy, {"max_len": 5, "min_len": -1}, "min_len"),
    (beam_search, {"max_len": 5, "beam_size": 0}, "beam_size"),
    (beam_search, {"max_len": 0, "beam_size": 2}, "max_len"),
    (beam_search, {"max_len": 5, "beam_size": 2, "no_repeat_ngram_size": -1}, "ngram"),
    (sample, {"max_len": 5, "temperature": 0.0}, "temperature"),
    (sample, {"max_len": 5, "temperature": -1.0}, "temperature"),
    (sample, {"max_len": 5, "top_p": 0.0}, "top_p"),
    (sample, {"max_len": 5, "top_p": 1.5}, "top_p"),
    (sample, {"max_len": 5, "top_k": 0}, "top_k"),
    (sample, {"max_len": 0}, "max_len"),
    (non_autoregressive, {"length_scale": 0.0}, "length_scale"),
    (non_autoregressive, {"lengths": [1, 2]}, "lengths"),  # the batch has 3
    (non_autoregressive, {"lengths": [1, 2, 99]}, "lengths"),
]


@pytest.mark.parametrize(("decode", "options", "name"), CASES)
def test_bad_arguments_are_one_line_errors(
    make_model, make_batch, decode: Callable[..., Any], options: dict[str, Any], name: str
) -> None:
    model = make_model()
    encoded, _ = make_batch(model)
    with pytest.raises(ValueError, match=name) as error:
        decode(model, encoded, **options)
    assert "\n" not in str(error.value)
