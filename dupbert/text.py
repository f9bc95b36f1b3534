"""What the chapters' text shares: numbers written as text (a mean with its interval, a p-value).
"""

from __future__ import annotations

import pandas as pd


def interval_text(mean, low, high, signed: bool = False) -> str:
    """``"12.34 [11.00, 13.68]"`` (``signed``: ``"+0.50 [-0.10, +1.10]"``); the mean alone where
    ``low`` is NaN, ``""`` where ``mean`` is NaN."""
    if pd.isna(mean):
        return ""
    sign = "+" if signed else ""
    text = f"{mean:{sign}.2f}"
    return text if pd.isna(low) else f"{text} [{low:{sign}.2f}, {high:{sign}.2f}]"


def p_text(p) -> str:
    """A p-value to three decimals, ``"<0.001"`` below 0.001, ``""`` for NaN."""
    return "" if pd.isna(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")
