"""Readers: the loading of a user's own files (or a recipe, by name) in the file formats
of :mod:`selfattn.data.formats` and the ones below, and a user's input to a trained model.

* :mod:`.audio` — WAV and FLAC files as samples, and the speech front end on a file;
* :mod:`.wav_csv` — a CSV of WAV files and their labels;
* :mod:`.loading` — :func:`~selfattn.data.readers.loading.load_dataset`;
* :mod:`.user_input` — a user's input to a trained model (``selfattn predict``), read as
  its training examples were: :mod:`.user_description` says what the model reads, and
  one module a kind reads it — :mod:`.user_images`, :mod:`.user_speech`,
  :mod:`.user_graphs` (molecules and graphs), :mod:`.user_vectors` (``.npz``).
"""
