"""The inspector's one error type (its CLI prints it as one line, exit status 1)."""

from __future__ import annotations


class InspectError(ValueError):
  """Inputs the inspector cannot render (no files, tokenizer mismatch, bad shapes)."""
