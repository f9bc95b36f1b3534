"""The emergence chapter's tables (``notebooks/emergence.ipynb``): the pre-stated rules' steps and
verdicts per model and per seed, the final per-layer top-1, the rule past the plateau, and what
each stage cost; from the frames of :mod:`dupbert.training.emergence`, read once for the chapter
(:func:`read_runs`). The chapter's prose, and the rules themselves, are in its Markdown cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from .text import cell
from ..core.results import read_table, repository_path
from ..training.emergence import (across_seeds, baselines, emergence_summary, past_plateau,
                                  predicting_levels, read_record)
from ..training.pretrain import MODELS


class Runs(NamedTuple):
    """The pretraining record as the chapter reads it (:func:`read_runs`); the frames have the
    columns of :func:`dupbert.training.emergence.read_record`."""

    record: pd.DataFrame
    """The rows of the chapter's ``models``, in that order."""
    everything: pd.DataFrame
    """Every run's rows, as stored."""
    shown: list[str]
    """``models``, then the runs past the plateau that have rows."""
    running: list[str]
    """The runs past the plateau that have rows."""
    pending: list[str]
    """The runs past the plateau without rows yet."""
    rows: pd.DataFrame
    """The rows of ``shown``, in that order."""
    loss: pd.DataFrame
    """The training-loss rows of ``shown``, in that order."""
    later: pd.DataFrame
    """The rows of ``running`` (from ``rows``)."""
    inits: dict[str, str]
    """``{run: the model it continues}`` for the runs of ``shown`` that
    :data:`dupbert.training.pretrain.MODELS` continues from another model (for
    :func:`dupbert.training.emergence.inherited_tokens`)."""
    stage_sizes: dict[str, int]
    """``{run: steps per stage}`` for the runs of ``shown`` in
    :data:`dupbert.training.pretrain.MODELS` (for :func:`dupbert.training.emergence.stage_costs`)."""


def read_runs(tables_dir: str | Path, models: Sequence[str], past_plateau_models: Sequence[str]) -> Runs:
    """The record of ``tables_dir`` (from the repository root) as the chapter shows it: ``models``,
    then those of ``past_plateau_models`` that have rows (the others are pending), and the
    registered settings of the runs shown.

    Raises:
        FileNotFoundError, ValueError: as :func:`dupbert.training.emergence.read_record` (a missing
            file; a model of ``models`` without rows).
    """
    folder = repository_path(tables_dir)
    record, _ = read_record(folder, models)
    everything, _ = read_record(folder)
    running = [m for m in past_plateau_models if m in set(everything["model"])]
    pending = [m for m in past_plateau_models if m not in running]
    shown = list(dict.fromkeys([*models, *running]))
    rows, loss = read_record(folder, shown)
    return Runs(record, everything, shown, running, pending, rows, loss,
                later=rows[rows["model"].isin(running)],
                inits={m: MODELS[m].init for m in shown if m in MODELS and MODELS[m].init},
                stage_sizes={m: MODELS[m].stage_size for m in shown if m in MODELS})


def steps_evaluated(runs: Runs) -> str:
    """One line per run shown: ``"<run>: evaluated at steps 0, 10, 1,000"`` (sorted, thousands
    separators), then ``"no rows yet: <runs>"`` where some are pending."""
    lines = []
    for name in runs.shown:
        steps = sorted(runs.rows.loc[runs.rows["model"] == name, "step"].unique())
        lines.append(f"{name}: evaluated at steps {', '.join(f'{s:,}' for s in steps)}")
    if runs.pending:
        lines.append(f"no rows yet: {', '.join(runs.pending)}")
    return "\n".join(lines)


REACTION_ARCHITECTURES = {"bert": "BERT", "albert": "ALBERT"}
"""The reaction runs' architectures (:data:`dupbert.training.pretrain.MODELS`), in the order
their groups are shown, and their labels."""
NO_REACTION_ROWS = ("reaction SMILES runs: no rows yet", "No reaction SMILES run has rows yet.")
"""What :func:`reaction_results` gives where no reaction run has rows: the figure's text, the note."""


def reaction_runs(everything: pd.DataFrame, reaction_models: Sequence[str] | None
                  ) -> tuple[pd.DataFrame, dict[str, list[str]], list[str]]:
    """The reaction SMILES runs of the record.

    Args:
        everything: every run's rows (:attr:`Runs.everything`).
        reaction_models: the registered runs (names in :data:`dupbert.training.pretrain.MODELS`),
            or None: none.

    Returns:
        ``(record, groups, missing)``: the rows of the runs that have some (as stored);
        ``{label: [run, ...]}`` per architecture of :data:`REACTION_ARCHITECTURES` that has a
        registered run, in ``reaction_models`` order, runs without rows included; the runs
        without rows.

    Raises:
        KeyError: a run not in :data:`dupbert.training.pretrain.MODELS`.
    """
    reaction_models = list(reaction_models or [])
    present = [m for m in reaction_models if m in set(everything["model"])]
    groups = {label: [m for m in reaction_models if MODELS[m].architecture == architecture]
              for architecture, label in REACTION_ARCHITECTURES.items()}
    return (everything[everything["model"].isin(present)], {g: ms for g, ms in groups.items() if ms},
            [m for m in reaction_models if m not in present])


def reaction_results(everything: pd.DataFrame, reaction_models: Sequence[str] | None,
                     predicting_multiple: float, threshold: float) -> tuple:
    """The reaction SMILES section: the seeds of each architecture (:func:`reaction_runs`), each
    predicting from ``predicting_multiple`` times its baseline
    (:func:`dupbert.training.emergence.predicting_levels`), drawn by
    :func:`dupbert.book.emergence_figures.plot_seeds` and answered by :func:`seed_tables` (a run
    short of its registered steps in :data:`dupbert.training.pretrain.MODELS` is running).

    Returns:
        ``(figure, per_seed, across, missing)``: the figure, :func:`seed_tables`' two tables and
        the runs without rows; where no run has rows, a figure and an IPython ``Markdown`` that
        say so (:data:`NO_REACTION_ROWS`) and ``per_seed`` None.

    Raises:
        KeyError: a run not in :data:`dupbert.training.pretrain.MODELS`; ValueError: a run without
            its step-0 baseline row (as :func:`~dupbert.training.emergence.predicting_levels`).
    """
    from IPython.display import Markdown

    from .emergence_figures import plot_seeds
    from .plots import no_runs_figure

    record, groups, missing = reaction_runs(everything, reaction_models)
    if record.empty:
        return no_runs_figure(NO_REACTION_ROWS[0]), None, Markdown(NO_REACTION_ROWS[1]), missing
    levels = predicting_levels(record, predicting_multiple)
    figure = plot_seeds(record, groups, levels, threshold)
    total_steps = {m: MODELS[m].total_steps for m in dict.fromkeys(record["model"])}
    per_seed, across = seed_tables(record, groups, levels, total_steps, threshold)
    return figure, per_seed, across, missing


def rq1_reconstruction(tables_dir: str | Path) -> pd.DataFrame:
    """RQ1's ``rq1-reconstruction`` table of ``tables_dir`` (from the repository root), for
    :func:`dupbert.training.emergence.beside_rq1`; where RQ1 wrote none, no rows (with its columns
    ``model, init, duplication, layer, top1``)."""
    table = read_table(tables_dir, "rq1-reconstruction")
    return pd.DataFrame(columns=["model", "init", "duplication", "layer", "top1"]) if table is None else table


def decimals(frame: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """``frame`` with every number to ``digits`` decimals, ``""`` where missing."""
    return frame.map(lambda v: "" if pd.isna(v) else f"{v:.{digits}f}")


def show(table: pd.DataFrame | None, note: str) -> None:
    """Display ``table``; print ``note`` instead where it is None or empty."""
    from IPython.display import display

    if table is None or table.empty:
        print(note)
    else:
        display(table)

SUMMARY_HEADINGS = {"last_step": "evaluated to", "s_embedding": "hidden state 0",
                    "s_last": "last hidden state", "s_all": "every block output",
                    "holds": "stays decodable", "worst_layer": "last to get there",
                    "final_worst_top1": "lowest block output at the end",
                    "final_last_top1": "last hidden state at the end",
                    "s_duplicated_all": "duplicated: every block output",
                    "verdict_layers": "verdict", "by_construction": "by construction",
                    "verdict_duplication": "duplication"}
"""The columns of :func:`dupbert.training.emergence.emergence_summary` that the chapter shows, and their
headings; ``by_construction`` is added by :func:`summary_table`."""


def _steps(value) -> str:
    return "never" if pd.isna(value) else f"{int(value):,}"


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.emergence_summary` as the chapter shows it: one row per model, the
    steps at which each part first became decodable (``"never"`` where it did not; thousands
    separators), whether every block output stays decodable after (``"-"`` where it never was),
    the lowest block output and the last hidden state at the last step (3 decimals), the
    verdicts, and ``by construction`` = ``"yes"`` where the last hidden state, the one the head is
    trained on, is itself the last to get there (then "emerges with the last layer" dates when the
    trained-on layer became decodable, not a wait of the middle layers for it)."""
    where = summary.set_index("model")
    shown = pd.DataFrame(index=where.index)
    for column, heading in SUMMARY_HEADINGS.items():
        if column in ("last_step", "s_embedding", "s_last", "s_all", "s_duplicated_all"):
            shown[heading] = where[column].map(_steps)
        elif column == "holds":
            shown[heading] = ["-" if pd.isna(s) else ("yes" if h else "no")
                              for h, s in zip(where["holds"], where["s_all"])]
        elif column.startswith("final_"):
            shown[heading] = where[column].map("{:.3f}".format)
        elif column == "by_construction":
            shown[heading] = ["yes" if w == last and not pd.isna(s) else "no"
                              for w, last, s in zip(where["worst_layer"], where["last_layer"], where["s_all"])]
        else:
            shown[heading] = where[column]
    return shown


def final_table(record: pd.DataFrame) -> pd.DataFrame:
    """Every measure per hidden state (rows) and (model, measure) (columns) at each model's last
    evaluated step, top-1 to 3 decimals (``""`` where not measured); the MLM loss rows left out."""
    last = record[record["step"] == record.groupby("model")["step"].transform("max")]
    table = last[last["measure"] != "mlm"].pivot_table(index="layer", columns=["model", "measure"],
                                                       values="top1")
    return table.map(lambda v: "" if pd.isna(v) else f"{v:.3f}")


PAST_PLATEAU_HEADINGS = {"P": "first predicting step P", "masked_P": "masked top-1 at P",
                         "F": "last step F", "masked_F": "masked top-1 at F",
                         "largest_fall": "largest fall, P to F", "lowest_F": "lowest at F",
                         "verdict": "verdict"}
"""The columns of :func:`dupbert.training.emergence.past_plateau` that the chapter shows."""


def past_plateau_table(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.past_plateau` as the chapter shows it: one row per model, steps
    whole, top-1 to 3 decimals (``"-"`` where there is none), the hidden state of the largest
    fall and of the lowest reconstruction beside them."""
    where = table.set_index("model")
    shown = pd.DataFrame(index=where.index)
    for column, heading in PAST_PLATEAU_HEADINGS.items():
        shown[heading] = where[column].map(lambda v: v if isinstance(v, str)
                                           else cell(v, ",.0f" if column in ("P", "F") else ".3f", "-"))
    shown[PAST_PLATEAU_HEADINGS["largest_fall"]] += where["falling_layer"].map(
        lambda layer: "" if pd.isna(layer) else f" (hidden state {int(layer)})")
    shown[PAST_PLATEAU_HEADINGS["lowest_F"]] += where["lowest_layer"].map(
        lambda layer: f" (hidden state {int(layer)})")
    return shown


def stage_cost_table(costs: pd.DataFrame) -> pd.DataFrame:
    """:func:`dupbert.training.emergence.stage_costs` as the chapter shows it: one row per model and
    stage, steps as a range, tokens in millions, hours to 2 decimals, top-1 to 3."""
    shown = pd.DataFrame({
        "model": costs["model"], "stage": costs["stage"],
        "steps": [f"{a:,}-{b:,}" for a, b in zip(costs["first_step"], costs["last_step"])],
        "tokens (M)": (costs["tokens"] / 1e6).map(lambda v: f"{v:.2f}"),
        "hours": costs["hours"].map(lambda v: f"{v:.2f}"),
        "masked top-1 at its end": costs["masked_top1"].map(lambda v: cell(v, ".3f", "-"))})
    return shown.set_index(["model", "stage"])


def sharing_table(top1: pd.DataFrame, shared: str, unshared: str) -> pd.DataFrame | None:
    """Masked top-1 at the output, step for step, of a recursive model (``shared``) beside the
    unshared body it was made from (``unshared``), at the steps both were evaluated, with the
    difference; ``top1``: :func:`dupbert.training.emergence.output_top1`. None where ``top1`` lacks
    either model."""
    if not {shared, unshared} <= set(top1.columns):
        return None
    both = top1[[unshared, shared]].dropna()
    shown = both.map(lambda v: f"{v:.3f}")
    shown["shared - unshared"] = (both[shared] - both[unshared]).map(lambda v: f"{v:+.3f}")
    shown.index = pd.Index([f"{int(step):,}" for step in both.index], name="step")
    return shown


SEED_HEADINGS = {"baseline": "baseline", "P": "P (predicting)", "masked_P": "masked top-1 at P",
                 "F": "last step F", "masked_F": "masked top-1 at F",
                 "s_all": "every block output decodable from", "first": "first question",
                 "largest_fall": "largest fall, P to F", "second": "second question"}
"""The columns of :func:`seed_tables`' per-seed table."""


def seed_tables(record: pd.DataFrame, groups: Mapping[str, list[str]], levels: Mapping[str, float],
                total_steps: Mapping[str, int], threshold: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both questions per seed and across seeds, for runs registered with several seeds.

    Args:
        record: the rows of the runs (:func:`dupbert.training.emergence.read_record`).
        groups: ``{architecture label: [run, ...]}``, one run per seed.
        levels: :func:`dupbert.training.emergence.predicting_levels` of ``record``.
        total_steps: each run's registered last step: a run short of it is ``running (step s of
            n)`` in both verdict columns and waits in the across-seed answer.
        threshold: reconstruction top-1 at which a hidden state counts as decodable.

    Returns:
        ``(per_seed, across)``: one row per run under :data:`SEED_HEADINGS` (steps whole, top-1 to
        3 decimals, ``"never"``/``"-"`` where there is none); one row per architecture, its
        :func:`dupbert.training.emergence.across_seeds` answer to each question.
    """
    first = emergence_summary(record, threshold).set_index("model")
    past = past_plateau(record, levels, threshold).set_index("model")
    running = {m: f"running (step {int(past.loc[m, 'F']):,} of {total_steps[m]:,})"
               for m in past.index if past.loc[m, "F"] < total_steps[m]}
    first_verdicts = {m: running.get(m, v) for m, v in first["verdict_layers"].items()}
    second_verdicts = {m: running.get(m, v) for m, v in past["verdict"].items()}
    per_seed = pd.DataFrame({
        SEED_HEADINGS["baseline"]: baselines(record).map("{:.3f}".format),
        SEED_HEADINGS["P"]: past["P"].map(_steps),
        SEED_HEADINGS["masked_P"]: past["masked_P"].map(lambda v: cell(v, ".3f", "-")),
        SEED_HEADINGS["F"]: past["F"].map(_steps),
        SEED_HEADINGS["masked_F"]: past["masked_F"].map("{:.3f}".format),
        SEED_HEADINGS["s_all"]: first["s_all"].map(_steps),
        SEED_HEADINGS["first"]: pd.Series(first_verdicts),
        SEED_HEADINGS["largest_fall"]: past["largest_fall"].map(lambda v: "-" if pd.isna(v) else f"{v:+.3f}"),
        SEED_HEADINGS["second"]: pd.Series(second_verdicts)})
    across = pd.DataFrame({question: across_seeds({m: v for m, v in verdicts.items() if m not in running}, groups)
                           for question, verdicts in (("first question", first_verdicts),
                                                      ("second question", second_verdicts))})
    return per_seed, across.rename_axis("across seeds")
