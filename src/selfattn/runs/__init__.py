"""Several runs at once: a table of the runs in a folder (:mod:`selfattn.runs.table`),
their learning curves (:mod:`selfattn.runs.plot`), and a grid of config values × seeds
trained as one sweep: planned and validated (:mod:`selfattn.runs.sweep_grid`), trained by
worker processes (:mod:`selfattn.runs.sweep_workers`), summarised as mean ± standard
deviation over seeds (:mod:`selfattn.runs.sweep_summary`)."""

from __future__ import annotations

from selfattn.runs.table import RunRecord, read_run, read_runs, runs_json, runs_table

__all__ = ["RunRecord", "read_run", "read_runs", "runs_json", "runs_table"]
