"""Tools: forward only the tools the conversation needs, picked by hybrid lexical + embedding ranking."""

from .policy import ToolsPolicy

__all__ = ["ToolsPolicy"]
