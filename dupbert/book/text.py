"""What the chapters' text shares: numbers written as text (a mean with its interval, a p-value),
the sentence that names the parameter profile behind a chapter's numbers, and the glue that pastes
numbers into the prose.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from ..training.tasks import data_note


def interval_text(mean, low, high, signed: bool = False) -> str:
    """``"12.34 [11.00, 13.68]"`` (``signed``: ``"+0.50 [-0.10, +1.10]"``); the mean alone where
    ``low`` is NaN, ``""`` where ``mean`` is NaN."""
    if pd.isna(mean):
        return ""
    sign = "+" if signed else ""
    text = f"{mean:{sign}.2f}"
    return text if pd.isna(low) else f"{text} [{low:{sign}.2f}, {high:{sign}.2f}]"


def cell(value, form: str = ".3f", missing: str = "") -> str:
    """A table cell: ``value`` in the format spec ``form`` (``".3f"``, ``",.0f"``, ``".2g"``), or
    ``missing`` where it is NaN or None."""
    return missing if pd.isna(value) else format(value, form)


def p_text(p) -> str:
    """A p-value to three decimals, ``"<0.001"`` below 0.001, ``""`` for NaN."""
    return "" if pd.isna(p) else ("<0.001" if p < 0.001 else f"{p:.3f}")


def data_notes(tasks: Iterable[str], runs: pd.DataFrame) -> str:
    """Markdown: ``"*task.* <note>"`` (:func:`dupbert.training.tasks.data_note` of ``runs``) for
    each distinct task of ``tasks`` in order of first appearance, separated by blank lines.

    Raises:
        UnknownTask: an unknown task.
    """
    return "\n\n".join(f"*{task}.* {data_note(task, runs)}" for task in dict.fromkeys(tasks))


PROFILE_NOTES = {
    "smoke": ("the notebook's own defaults: a few optimisation steps on tiny subsets, for "
              "`pytest --nbval`; these numbers test the code, not the paper"),
    "cpu": ("the `cpu` profile: for RQ3-RQ5 the pre-registered CPU study (real models and data, "
            "subsets and learning rates sized in pilots so that the baselines learn, 8 seeds, 4 for "
            "the dearest cell; SQuAD 2.0 left out after its pilots missed the floor; 128 runs, "
            "about 36 CPU-hours) and, for RQ3, RQ4 and the results at a glance, the tests "
            "registered after it (each with its runs and cost in the RQ3 chapter), all committed "
            "and re-read by the chapters; a model and task is judged only once all its planned "
            "seeds are in and its baseline reaches its floor"),
    "gpu": ("the `gpu` profile: the training sets available offline (SST-2 cut to 8,000), full "
            "evaluation sets, 5 seeds, run_glue/run_qa hyper-parameters, on one GPU"),
}


def profile_note(profile: str) -> str:
    """A Markdown sentence naming the profile behind a chapter's numbers."""
    note = PROFILE_NOTES.get(profile, f"the `{profile}` profile")
    return f"**These numbers come from {note}.**"


def glue_all(values: dict) -> None:
    """``myst_nb.glue(name, value, display=False)`` for every ``{name: value}`` of ``values``, in
    order: the numbers and tables a chapter's prose pastes (myst_nb comes with the kernel that
    runs the notebook, not with dupbert)."""
    from myst_nb import glue

    for name, value in values.items():
        glue(name, value, display=False)
