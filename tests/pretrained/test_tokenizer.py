"""The checkpoint's WordPiece tokenizer: the same ids as ``tokenizers`` reading the file,
[CLS]/[SEP], padding and masks, token types, word ids; bad folders in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from tokenizers.models import WordPiece
from tokenizers.normalizers import BertNormalizer
from tokenizers.pre_tokenizers import BertPreTokenizer

from selfattn.pretrained import PretrainedError, WordPieceTokenizer
from selfattn.specials import IGNORE_INDEX

SENTENCES = [
    "Hello, world!",
    "Tokenization of unbelievably long words",
    "Short.",
]


@pytest.fixture(scope="module")
def tokenizer(minilm_folder: Path) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_pretrained(minilm_folder)


@pytest.fixture(scope="module")
def reference(minilm_folder: Path) -> Tokenizer:
    """The file read by ``tokenizers`` alone (its own fixed padding to 128 turned off)."""
    ref = Tokenizer.from_file(str(minilm_folder / "tokenizer.json"))
    ref.no_padding()
    return ref


def test_hello_world_matches_the_tokenizers_library(
    tokenizer: WordPieceTokenizer, reference: Tokenizer, minilm_folder: Path
) -> None:
    batch = tokenizer.encode(["Hello, world!"])
    expected = reference.encode("Hello, world!")
    assert batch.input_ids.tolist() == [expected.ids]
    assert expected.ids[0] == tokenizer.cls_id == 101
    assert expected.ids[-1] == tokenizer.sep_id == 102
    assert tokenizer.tokens("Hello, world!") == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]
    # The file as it stands pads to 128: the same ids, then [PAD].
    as_shipped = Tokenizer.from_file(str(minilm_folder / "tokenizer.json")).encode("Hello, world!")
    assert as_shipped.ids[: len(expected.ids)] == expected.ids


def test_registered_name_loads_the_same_tokenizer(tokenizer: WordPieceTokenizer) -> None:
    by_name = WordPieceTokenizer.from_pretrained("minilm-l6")
    assert by_name.encode(SENTENCES).input_ids.equal(tokenizer.encode(SENTENCES).input_ids)
    assert by_name.vocab_size == 30522
    assert by_name.max_length == 512  # config.json's max_position_embeddings


def test_batch_pads_to_the_longest_with_masks(
    tokenizer: WordPieceTokenizer, reference: Tokenizer
) -> None:
    batch = tokenizer.encode(SENTENCES)
    expected = [reference.encode(text).ids for text in SENTENCES]
    lengths = [len(ids) for ids in expected]
    width = max(lengths)
    assert batch.input_ids.shape == (3, width)
    assert lengths[0] != lengths[1] != lengths[2]
    for row, ids in enumerate(expected):
        n = len(ids)
        assert batch.input_ids[row, :n].tolist() == ids
        assert batch.input_ids[row, n:].tolist() == [tokenizer.pad_id] * (width - n)
        assert batch.attention_mask[row].tolist() == [1] * n + [0] * (width - n)
    assert batch.attention_mask.dtype == torch.long
    assert batch.key_padding_mask.equal(batch.attention_mask == 0)
    assert batch.token_type_ids.equal(torch.zeros_like(batch.input_ids))


def test_pairs_get_token_type_one(tokenizer: WordPieceTokenizer, reference: Tokenizer) -> None:
    batch = tokenizer.encode(["The cat sat."], pairs=["It purred loudly."])
    expected = reference.encode("The cat sat.", "It purred loudly.")
    assert batch.input_ids[0].tolist() == expected.ids
    assert batch.token_type_ids[0].tolist() == expected.type_ids
    sep = batch.input_ids[0].tolist().index(tokenizer.sep_id)
    assert batch.token_type_ids[0, : sep + 1].eq(0).all()
    assert batch.token_type_ids[0, sep + 1 :].eq(1).all()


def test_word_ids_map_subwords_to_words(tokenizer: WordPieceTokenizer) -> None:
    words = [["Tokenization", "is", "unbelievably", "fun"], ["Short"]]
    batch = tokenizer.encode_words(words)
    first = batch.word_ids[0]
    assert first[0] is None  # [CLS]
    tokens = [tokenizer.tokenizer.id_to_token(i) for i in batch.input_ids[0].tolist()]
    pieces: dict[int, list[str]] = {}
    for token, word in zip(tokens, first, strict=True):
        if word is not None:
            pieces.setdefault(word, []).append(token)
    assert sorted(pieces) == [0, 1, 2, 3]
    for index, word in enumerate(words[0]):
        assert "".join(p.removeprefix("##") for p in pieces[index]) == word.lower()
    assert len(pieces[2]) > 1  # "unbelievably" is several subwords
    # The shorter row: [CLS] short [SEP], then padding with no word.
    assert batch.word_ids[1][:3] == (None, 0, None)
    assert set(batch.word_ids[1][3:]) == {None}


def test_first_subword_carries_the_word_label(tokenizer: WordPieceTokenizer) -> None:
    batch = tokenizer.encode_words([["Tokenization", "is", "fun"], ["Short"]])
    labels = batch.first_subword_labels([[4, 5, 6], [7]])
    assert labels.shape == batch.input_ids.shape
    row = labels[0].tolist()
    assert [label for label in row if label != IGNORE_INDEX] == [4, 5, 6]
    starts = [
        position
        for position, word in enumerate(batch.word_ids[0])
        if word is not None and batch.word_ids[0][position - 1] != word
    ]
    assert [row[p] for p in starts] == [4, 5, 6]
    assert labels[1].tolist().count(IGNORE_INDEX) == labels.shape[1] - 1
    with pytest.raises(ValueError, match="1 label rows for a batch of 2"):
        batch.first_subword_labels([[1, 2, 3]])


def test_long_input_is_cut_to_max_length(minilm_folder: Path) -> None:
    short = WordPieceTokenizer.from_pretrained(minilm_folder, max_length=8)
    batch = short.encode(["one two three four five six seven eight nine ten"])
    assert batch.input_ids.shape == (1, 8)
    assert batch.input_ids[0, -1].item() == short.sep_id


def test_vocab_txt_alone_tokenizes_the_same(
    minilm_folder: Path, tmp_path: Path, tokenizer: WordPieceTokenizer
) -> None:
    for name in ("config.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm_folder / name, tmp_path / name)
    (tmp_path / "model.safetensors").write_bytes(b"")
    from_vocab = WordPieceTokenizer.from_pretrained(tmp_path)
    assert from_vocab.encode(SENTENCES).input_ids.equal(tokenizer.encode(SENTENCES).input_ids)


def fake_checkpoint(folder: Path) -> Path:
    """A folder that passes the file check (the tokenizer reads no weights)."""
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 32}))
    (folder / "model.safetensors").write_bytes(b"")
    return folder


def save_tokenizer(folder: Path, vocab: list[str]) -> Path:
    tok = Tokenizer(WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = BertNormalizer(lowercase=True)
    tok.pre_tokenizer = BertPreTokenizer()
    path = folder / "tokenizer.json"
    tok.save(str(path))
    return path


def message(err: pytest.ExceptionInfo[PretrainedError]) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("missing", ["[CLS]", "[SEP]"])
def test_tokenizer_without_a_special_is_one_line(tmp_path: Path, missing: str) -> None:
    vocab = [t for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"] if t != missing]
    path = save_tokenizer(fake_checkpoint(tmp_path), vocab)
    with pytest.raises(PretrainedError) as err:
        WordPieceTokenizer.from_pretrained(tmp_path)
    assert message(err).startswith(f"{path}: no {missing} token in the vocabulary")


def test_a_small_tokenizer_file_works(tmp_path: Path) -> None:
    save_tokenizer(fake_checkpoint(tmp_path), ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"])
    tokenizer = WordPieceTokenizer.from_pretrained(tmp_path)
    assert tokenizer.max_length == 32
    assert tokenizer.encode(["Hello there"]).input_ids.tolist() == [[2, 4, 1, 3]]


def test_not_a_checkpoint_folder(tmp_path: Path) -> None:
    save_tokenizer(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    with pytest.raises(PretrainedError) as err:
        WordPieceTokenizer.from_pretrained(tmp_path)
    assert message(err).startswith(f"{tmp_path / 'config.json'}: missing")


def test_no_tokenizer_file(tmp_path: Path) -> None:
    fake_checkpoint(tmp_path)
    with pytest.raises(PretrainedError) as err:
        WordPieceTokenizer.from_pretrained(tmp_path)
    assert message(err) == f"{tmp_path / 'tokenizer.json'}: missing (and no vocab.txt beside it)"


def test_a_corrupt_tokenizer_file(tmp_path: Path) -> None:
    fake_checkpoint(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(PretrainedError) as err:
        WordPieceTokenizer.from_pretrained(tmp_path)
    assert message(err).startswith(f"{tmp_path / 'tokenizer.json'}: not a tokenizers file")


def test_one_string_is_refused(tokenizer: WordPieceTokenizer) -> None:
    with pytest.raises(TypeError, match="list of sentences"):
        tokenizer.encode("Hello")  # type: ignore[arg-type]


def test_a_bad_position_count_in_config(tmp_path: Path) -> None:
    save_tokenizer(fake_checkpoint(tmp_path), ["[PAD]", "[UNK]", "[CLS]", "[SEP]"])
    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": "many"}))
    with pytest.raises(PretrainedError) as err:
        WordPieceTokenizer.from_pretrained(tmp_path)
    assert message(err) == (
        f"{tmp_path / 'config.json'}: max_position_embeddings must be an integer >= 2, got 'many'"
    )
