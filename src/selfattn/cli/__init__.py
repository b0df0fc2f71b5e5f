"""Command-line interface (``selfattn``)."""
