"""Hypothesis strategies shared by the fuzz tests of the decoders: any JSON value."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["json_values"]


def json_values(*, int_bits: int, max_size: int, max_leaves: int) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars (integers past 64 bits, NaN and infinities), lists and objects."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**int_bits), max_value=2**int_bits)
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=20)
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=max_size)
            | st.dictionaries(st.text(max_size=5), inner, max_size=max_size)
        ),
        max_leaves=max_leaves,
    )
