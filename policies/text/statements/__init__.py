"""Typed statements (preferences, facts, values) read from conversation sentences."""
