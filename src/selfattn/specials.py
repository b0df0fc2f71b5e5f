"""The special tokens, ids and labels every vocabulary, collator, model and loss agrees on.

Defined here once, below both the models and the data, so that a vocabulary's ``<pad>``
and a model's padding index, or a collator's ignored label and a loss's
``ignore_index``, cannot drift apart.

Ids follow one convention in every token space: ``<pad>`` 0, ``<unk>`` 1; a seq2seq
target space adds ``<bos>`` 2 and ``<eos>`` 3, and its real tokens (or, in pointer mode,
source positions) start at :data:`NUM_SPECIALS`.
"""

from __future__ import annotations

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<eos>"
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
#: Ids before a seq2seq target space's first real token: PAD, UNK, BOS, EOS.
NUM_SPECIALS = 4

#: The label id a loss skips (torch's ``cross_entropy`` default ``ignore_index``): padding,
#: and positions labelled :data:`NO_LABEL`.
IGNORE_INDEX = -100

#: A token task's label for a position that is not scored (a graph's unlabelled nodes):
#: the collator gives it :data:`IGNORE_INDEX`, and no label vocabulary counts it.
NO_LABEL = "<no-label>"

#: A label set's "no label applies": the target a seq2seq model writes for an empty set
#: (a target needs one token before its end), and how a user's multi-label file says so.
NO_LABELS = "<none>"

#: A story's facts end with this token, its questions with :data:`STORY_QUESTION`: the
#: stories recipe writes them, and a memory network splits stories there.
STORY_END = "."
STORY_QUESTION = "?"

__all__ = [
    "BOS",
    "BOS_ID",
    "EOS",
    "EOS_ID",
    "IGNORE_INDEX",
    "NO_LABEL",
    "NO_LABELS",
    "NUM_SPECIALS",
    "PAD",
    "PAD_ID",
    "STORY_END",
    "STORY_QUESTION",
    "UNK",
    "UNK_ID",
]
