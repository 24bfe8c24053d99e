"""Poisoning: check answers (and incoming tool/assistant text) against the knowledge base; block,
quarantine or drop what the KB contradicts."""

from .policy import PoisoningPolicy

__all__ = ["PoisoningPolicy"]
