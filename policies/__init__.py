"""ctxwarden's context policies. Usable without the server: build a policy with its Config and
a `policies.base.Services`, then call `on_request` / `on_response` on an `Exchange`."""

from .base import Answer, BasePolicy, Block, Exchange, Policy, ProxyTool, Reject, Respond, Services

__all__ = ["Answer", "BasePolicy", "Block", "Exchange", "Policy", "ProxyTool", "Reject", "Respond", "Services"]
