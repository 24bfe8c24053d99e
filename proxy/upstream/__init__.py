"""Upstream: the pooled HTTP client with retries and circuit breaker, and litellm for other providers."""
