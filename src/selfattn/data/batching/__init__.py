"""Batching: from examples to splits, to length-fitted examples, to padded batches.

* :mod:`.splits` — seeded, stratified train / dev / test splits;
* :mod:`.lengths` — fitting examples to a model's longest input (cut or windowed);
* :mod:`.collate` — token / sequence / regression batches (padding → masks);
* :mod:`.seq2seq_collate` — teacher-forced seq2seq batches.
"""
