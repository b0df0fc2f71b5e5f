"""The attention explorer (lecture 003, "Attention Visualization"): one self-contained
HTML page, written to a file or served on 127.0.0.1, that shows every layer's and head's
attention for a trained model's inputs, with per-head statistics (mean attention
distance, entropy) to tell local heads from global ones."""

from selfattn.explore.page import read_payload, render_page

__all__ = ["read_payload", "render_page"]
