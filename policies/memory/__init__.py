"""Memory: what a user said that should outlive the conversation (WRITE), brought back where it
bears on a later request (SELECT), kept apart by tenant, user and task (ISOLATE)."""

from .policy import MemoryPolicy

__all__ = ["MemoryPolicy"]
