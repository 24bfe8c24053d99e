"""Session state and content versions: in this process by default, on Redis for replicas."""

from .backends import LocalState, RedisState, StateBackend, build_state
from .sessions import SessionSync

__all__ = ["LocalState", "RedisState", "SessionSync", "StateBackend", "build_state"]
