"""Several runs at once: a table of the runs in a folder (:mod:`selfattn.runs.table`),
their learning curves (:mod:`selfattn.runs.plot`), and a grid of config values × seeds
trained as one sweep (:mod:`selfattn.runs.sweep`)."""

from __future__ import annotations

from selfattn.runs.table import RunRecord, read_run, read_runs, runs_json, runs_table

__all__ = ["RunRecord", "read_run", "read_runs", "runs_json", "runs_table"]
