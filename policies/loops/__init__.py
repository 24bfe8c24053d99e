"""Loops: notice an agent repeating itself (tool-call cycles, retries after refusals) and stop it."""

from .policy import LoopsPolicy

__all__ = ["LoopsPolicy"]
