"""The live dashboard: GET /dashboard (page, login), GET /admin/stats (its JSON) and
/admin/stats/stream (the same as server-sent events), per-minute aggregates in SQLite under
storage.path (or Redis), cost saved at litellm's input prices. See dashboard.Dashboard."""

from .dashboard import Dashboard

__all__ = ["Dashboard"]
