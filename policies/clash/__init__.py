"""Clash: find statements in the conversation that contradict each other, and resolve them."""

from .policy import ClashPolicy

__all__ = ["ClashPolicy"]
