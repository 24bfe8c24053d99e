"""What the loops policy says: the stop answer, the note to the model, the error-state answer.

Everything the proxy writes opens with "[ctxwarden]", so a reader (and the poisoning policy) can
tell the proxy's words from the model's and the user's.
"""

from __future__ import annotations

from .detect import Loop


def describe(loop: Loop) -> str:
    """One sentence naming the repetition."""
    if loop.kind == "rounds":
        recent = " → ".join(loop.history[-5:])
        return (
            f"{loop.tool_rounds} tool-call rounds since the user's last message without an answer "
            f"(most recent: {recent})"
        )
    calls = " → ".join(loop.cycle)
    what = "the same tool call" if loop.kind == "repeat" else f"the same {loop.period}-step cycle"
    return (
        f"{what} {loop.repeats} times in a row with no new information (identical or empty results): {calls}"
    )


def stop_answer(loop: Loop, after_note: bool = False) -> str:
    """The assistant message the proxy answers with instead of calling the model again."""
    why = " It continued after a note asking to change approach." if after_note else ""
    if loop.kind == "rounds":
        advice = (
            "Answer with what has been found so far, or ask the user to narrow the task. "
            "If long runs are expected, raise policies.loops.max_tool_rounds, or set it to null (no count limit, the default)."
        )
    else:
        advice = (
            "Calling these tools again with the same arguments will not help. Try a different tool or "
            "different arguments, answer with what is already known, or ask the user for the missing information."
        )
    return f"[ctxwarden] I stopped this agent run: it made {describe(loop)}.{why}\n\n{advice}"


def loop_note(loop: Loop) -> str:
    """The note forwarded to the model at the end of the request (a user turn), naming the repetition."""
    if loop.kind == "rounds":
        ask = "Stop calling tools now: answer the user with what you have, saying what is still missing."
    else:
        ask = (
            "Do not make these calls again with the same arguments. Change approach (a different tool or "
            "different arguments) or answer the user with what you know, saying what is missing."
        )
    return f"[ctxwarden] Loop guard: you have made {describe(loop)}. {ask}"


def error_state_answer(failures: int, reasons: list[str]) -> str:
    """The answer when a session's exchanges keep being refused: stop retrying, say why."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    why = ", ".join(f"{r} ×{n}" if n > 1 else r for r, n in counts.items()) or "refused"
    return (
        f"[ctxwarden] I stopped retrying: the last {failures} attempts in this session were refused "
        f"({why}), so sending the same request again will not succeed. "
        "Please start over with a shorter or different request; the next new user message will be tried again."
    )
