"""Reading a log's lines for its digest (digest.py): which are errors and stack traces, which are
warnings, and how much each line matters.

Every error line (ERROR, FATAL, CRITICAL, SEVERE, an exception, a panic, `level=error`, `error: …`)
and every line of a stack trace after it (Java `at …`, `Caused by`, `... N more`; Python's
`Traceback`, `File …`, the raised exception) is a *problem* line, which a digest keeps whatever its
budget; a frame with no error line before it counts too. Linear in the number of lines.
"""

from __future__ import annotations

import re

from .content import LOG_LINE

HEAD_LINES, TAIL_LINES = 5, 10  # log lines always offered at each end
TRACE_LINES = 400  # lines after an error line read as its stack trace, at most
ERROR_PRIORITY, TRACE_END_PRIORITY, TRACE_PRIORITY = 99.0, 98.0, 97.0  # above everything else in a log

_PROBLEM = re.compile(r"\b(?:ERROR|ERR|FATAL|CRITICAL|SEVERE|PANIC|EMERG|ALERT|Traceback|Exception)\b|^panic:"
                      r"|\w(?:Error|Exception)\b|(?i:\blevel\W{1,3}(?:error|fatal|critical|crit|panic|emerg|alert))"
                      r"|(?i:\[(?:error|fatal|crit|critical|alert|emerg)\])|(?i:^\W{0,2}(?:error|fatal)(?:\[\w+\])?:)"
                      r"|\b(?:error|fatal)(?:\[\w+\])?: |^\s*Caused by\b")
_WARNING = re.compile(r"\bWARN(?:ING)?\b|(?i:\blevel\W{1,3}warn)")
_TRACE = re.compile(r"^\s+\S|^Traceback|^Caused by|^During handling|^The above exception|^[\w.$]+(?:Error|Exception)\b"
                    r"|^\s*\.\.\. \d+ (?:more|common frames omitted)")
# A stack-trace line wherever it stands (some log formats print frames unindented, or alone)
_FRAME = re.compile(r"^\s*at [\w.$<>/]+(?:\.[\w$<>]+)*\s*\(|^\s*File \"[^\"]*\", line \d+|^\s*Caused by\b"
                    r"|^\s*\.\.\. \d+ (?:more|common frames omitted)|^Traceback \(most recent call last\)")
_RAISED = re.compile(r"^[\w.$]+(?::|$)")


def log_priorities(lines: list[str]) -> tuple[list[float], list[bool]]:
    """Each line's priority and whether it is an error or stack-trace line (kept whatever the
    budget: errors and traces first, a trace's last line, what went wrong, before its frames), then
    warnings, then the tail, then the head."""
    n = len(lines)
    priority = [10.0] * n
    problem = [False] * n
    for i in range(min(HEAD_LINES, n)):
        priority[i] = 70.0
    for i in range(max(0, n - TAIL_LINES), n):
        priority[i] = 80.0 + (i - n) / 1000  # the last lines first
    i = 0
    while i < n:
        line = lines[i]
        if _WARNING.search(line):
            priority[i] = max(priority[i], 86.0)
        if not _PROBLEM.search(line):
            if _FRAME.match(line):  # a frame with no error line before it (a trace cut, or printed alone)
                priority[i], problem[i] = max(priority[i], TRACE_PRIORITY), True
            i += 1
            continue
        priority[i], problem[i] = ERROR_PRIORITY, True
        j = i + 1
        while j < n and j - i <= TRACE_LINES and (_TRACE.match(lines[j]) or _FRAME.match(lines[j])) \
                and not LOG_LINE.match(lines[j]):
            priority[j], problem[j] = max(priority[j], TRACE_PRIORITY), True
            if _PROBLEM.search(lines[j]):  # `Caused by: …`, the exception a Python trace ends with
                priority[j] = TRACE_END_PRIORITY
            j += 1
        if j > i + 1 and j < n and lines[j - 1][:1].isspace() and _RAISED.match(lines[j]) and not LOG_LINE.match(lines[j]):
            priority[j], problem[j] = TRACE_END_PRIORITY, True  # Python's trace ends unindented: `PaymentDeclined: card_declined`
            j += 1
        if j > i + 1:
            priority[j - 1] = max(priority[j - 1], TRACE_END_PRIORITY)  # a trace ends with what went wrong
        i = max(i + 1, j)
    return priority, problem
