"""Upstream: the pooled HTTP client (client), its circuit breaker (breaker), litellm for other providers (providers)."""
