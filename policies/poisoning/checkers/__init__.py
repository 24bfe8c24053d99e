"""Checkers behind one interface (`poisoning.checker: local | nli | llm | hybrid`)."""

from __future__ import annotations

from typing import Any

from .base import Checker


def build_checker(config: Any, services: Any, local: Checker) -> Checker:
    """The checker `config.checker` names; `local` is the offline one (and the fallback of the judge)."""
    kind = config.checker
    if kind == "local":
        return local
    if kind == "nli":
        from .nli import NLIChecker

        return NLIChecker(config.nli)
    from .llm import LLMChecker

    judge = LLMChecker(config.judge, services, fallback=local)
    if kind == "llm":
        return judge
    from .hybrid import HybridChecker

    return HybridChecker(local, judge, config.hybrid.uncertain_band)
