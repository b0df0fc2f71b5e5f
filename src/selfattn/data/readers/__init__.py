"""Readers: file formats, and the loading of a user's own files (or a recipe, by name).

* :mod:`.formats` — ``word/TAG`` text, CoNLL-U, ``label,text`` CSV/TSV, ``.npz`` vector
  sets, sktime ``.ts``, ``source<TAB>target`` parallel text;
* :mod:`.wav_csv` — a CSV of WAV files and their labels;
* :mod:`.loading` — :func:`~selfattn.data.readers.loading.load_dataset`.
"""
