"""The file formats a user (or a recipe) hands to selfattn, each read into
``list[Example]``: :mod:`.text` (``word/TAG`` text, CoNLL-U, ``label,text`` CSV/TSV,
``source<TAB>target`` parallel text, and the tokenizer) and :mod:`.numeric` (``.npz``
vector sets, sktime ``.ts`` time series).

The recipes parse their files with them, and :mod:`selfattn.data.readers` loads a user's
files (or a recipe) through them; they import neither.
"""
