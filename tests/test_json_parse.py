"""The request body's parse (proxy/validation.py): orjson's speed, Python's json's reading.

orjson reads an integer past 64 bits as a float; the parse must notice and read such a body again
with json, so a body is never changed on its way through. Every other body reads the same either way.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from ctxwarden.proxy.errors import ProxyError
from ctxwarden.proxy.validation import parse_json_body

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(2**200), max_value=2**200)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                      max_leaves=30)


def same(a, b) -> bool:
    """Equal with the same types all the way down (1 and 1.0 are not the same reading)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=8), VALUES, max_size=6), st.booleans())
def test_every_body_reads_as_pythons_json_reads_it(body, ascii_only):
    raw = json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        expected = json.loads(raw)
    except ValueError:  # a lone surrogate written raw by surrogatepass: not UTF-8, refused below
        with pytest.raises(ProxyError):
            parse_json_body(raw)
        return
    if any("\ud800" <= ch <= "\udfff" for ch in raw.decode("utf-8", "surrogatepass")) or "\\ud" in raw.decode().lower():
        try:
            got = parse_json_body(raw)
        except ProxyError as exc:  # a lone surrogate escape: refused, with its path
            assert "lone UTF-16 surrogate" in exc.message
            return
    else:
        got = parse_json_body(raw)
    assert same(got, expected)


def test_integers_past_64_bits_stay_integers_and_floats_stay_floats():
    raw = b'{"model": "m", "seed": 123456789012345678901234567890, "n": -9223372036854775809, "x": 1e19, "y": 18446744073709551615}'
    body = parse_json_body(raw)
    assert body["seed"] == 123456789012345678901234567890 and type(body["seed"]) is int
    assert body["n"] == -9223372036854775809 and type(body["n"]) is int
    assert type(body["x"]) is float and body["x"] == 1e19
    assert body["y"] == 2**64 - 1


@pytest.mark.parametrize("raw, says", [
    (b'{"a": NaN}', "NaN is not a JSON value"),
    (b'{"a": 1e999}', "number out of range"),
    (b'{"a": "\\ud800"}', "a contains a lone UTF-16 surrogate"),
    (b'{"k": {"\\udc00": 1}}', "contains a lone UTF-16 surrogate"),
    (b'{"a": 1,}', "not valid JSON"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'[1, 2]', "must be a JSON object, not an array"),
    (b'{"a": ' + b"9" * 5000 + b"}", "4300 digits"),
])
def test_what_is_refused_is_named_as_before(raw, says):
    with pytest.raises(ProxyError) as caught:
        parse_json_body(raw)
    assert says in caught.value.message, caught.value.message
