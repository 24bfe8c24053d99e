"""The live dashboard: GET /dashboard (page, login), GET /admin/stats (its JSON), per-minute
aggregates in SQLite under storage.path. See dashboard.Dashboard."""

from .dashboard import Dashboard

__all__ = ["Dashboard"]
