"""The RQ5 chapter's tables and glued numbers (``notebooks/rq5.ipynb``): the ensembles counted,
single models and ensembles against their trivial baseline and floor, the comparisons, their
robustness over partitions of the seeds, the paper beside ours, and the per-cell findings its "What
the numbers say" section shows; from the frames of :mod:`dupbert.study.rq5`, scores in points (accuracy
x 100, SQuAD EM/F1 as they are). The prose is in the notebook's Markdown. Also the chapter's
plumbing: the runs it combines (:func:`study_runs`) and the numbers it glues (:func:`glued_numbers`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.results import repository_path
from ..study.comparisons import DID_NOT_LEARN, keep_main_setting, learned
from ..study.ensemble import read_runs
from ..study.paper import NOT_STATED, PAPER, PAPER_SCORES, claim
from ..study.profiles import plan_sweep, read_profile
from ..study.rq5 import KINDS, complete_configurations, distinct_ensembles, rq5_differences, study_files
from .text import interval_text


def waiting_text(waiting: pd.DataFrame, model: str | None = None, task: str | None = None) -> str:
    """:func:`dupbert.study.rq5.complete_configurations`' ``waiting`` (of one model and task if given)
    as ``"copy last 3/8 seeds; ..."``, else prefixed with model and task; ``""`` when none
    waits."""
    if model is None:
        return "; ".join(f"{r.model} on {r.task}: {r.configuration} ({r.seeds}/{r.planned} seeds)"
                         for r in waiting.itertuples())
    rows = waiting[(waiting["model"] == model) & (waiting["task"] == task)]
    return "; ".join(f"{r.configuration} {r.seeds}/{r.planned} seeds" for r in rows.itertuples())


def ensemble_counts(runs: pd.DataFrame, ensembles: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index): ``k``, seeds, configurations, evaluation examples, the number of
    distinct ensembles of each of :data:`dupbert.study.rq5.KINDS` and of disjoint seed blocks (integers).

    Args:
        runs: the :func:`dupbert.study.ensemble.read_runs` rows that were combined.
        ensembles: :func:`dupbert.study.rq5.rq5_ensembles` of them.
    """
    groups = runs.groupby(["model", "task"], sort=False)
    counts = distinct_ensembles(ensembles).pivot_table(
        index=["model", "task"], columns="kind", values="k", aggfunc="size", sort=False
    ).reindex(columns=list(KINDS)).fillna(0).astype(int)
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    counts.insert(0, "k", cross.groupby(["model", "task"], sort=False)["k"].max())
    counts.insert(1, "seeds", groups["seed"].nunique())
    counts.insert(2, "configurations", groups["duplication"].nunique())
    counts.insert(3, "eval examples", groups["n_eval"].max())
    counts["disjoint seed blocks"] = (cross[cross["disjoint"].astype(bool)]
                                      .groupby(["model", "task"], sort=False)["offset"].nunique())
    counts.columns.name = None
    return counts.fillna(0).astype(int).rename(columns={k: f"{k} (count)" for k in KINDS})


def floor_text(status: pd.DataFrame, model: str, task: str) -> str:
    """``"accuracy 28.91 vs floor 80: did not learn"``
    (:func:`dupbert.study.comparisons.learning_status`), or ``"no baseline runs"``."""
    cell = status[(status["model"] == model) & (status["task"] == task)]
    if cell.empty:
        return "no baseline runs"
    row = cell.iloc[0]
    text = f"{row['floor_metric']} {row['baseline_mean']:.2f} vs floor {row['floor']:g}"
    return text + ("" if row["learned"] else f": {DID_NOT_LEARN}")


def _summary_cell(row: Mapping) -> str:
    text = interval_text(row["mean"], row["ci_low"], row["ci_high"])
    if row["kind"] == "best single":
        return f"{text} ({row['configuration']})"
    if row["kind"].endswith("configuration"):
        return f"{text}; all {row['n_all']}: {row['mean_all']:.2f}"
    return text


def summary_table(summary: pd.DataFrame, trivial: Mapping, status: pd.DataFrame,
                  baseline: str = "baseline") -> pd.DataFrame:
    """RQ5's table of single models and ensembles: rows ``task, model, metric``; trivial baseline,
    baseline vs floor, then per kind of :func:`dupbert.study.rq5.rq5_summary` its mean [95% CI] (points).

    Args:
        summary: :func:`dupbert.study.rq5.rq5_summary`.
        trivial: :func:`dupbert.study.rq5.trivial_scores`.
        status: ``dupbert.study.comparisons.learning_status`` of the runs.
        baseline: the configuration :func:`dupbert.study.rq5.rq5_summary` reported as the baseline.
    """
    labels = {"single": "every single run", "baseline": f"{baseline} (single)",
              "best single": "best single configuration",
              "cross-configuration": "cross-configuration ensembles",
              "same-configuration": "same-configuration ensembles (control)"}
    cells = summary.assign(
        cell=[_summary_cell(row) for _, row in summary.iterrows()],
        column=[labels[k] + (f", k = {n}" if k.endswith("configuration") else "")
                for k, n in zip(summary["kind"], summary["k"])])
    table = cells.pivot_table(index=["task", "model", "metric"], columns="column", values="cell",
                              aggfunc="first", sort=False).fillna("")
    table.insert(0, "trivial", [f"{trivial.get((model, task, metric), np.nan):.2f}"
                                for task, model, metric in table.index])
    table.insert(1, "baseline vs floor", [floor_text(status, model, task) for task, model, _ in table.index])
    table.columns.name = None
    return table


def difference_table(differences: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """RQ5's comparisons table: rows ``task, model, metric``; baseline vs floor, then per comparison
    of :func:`dupbert.study.rq5.rq5_differences` its difference [95% CI] (points), p, and blocks tested
    of pairs.

    Args:
        differences: :func:`dupbert.study.rq5.rq5_differences`.
        status: ``dupbert.study.comparisons.learning_status`` of the runs.
    """
    shown = differences.assign(
        cell=[interval_text(d, lo, hi, signed=True) for d, lo, hi in
              zip(differences["difference"], differences["ci_low"], differences["ci_high"])],
        p=[("" if pd.isna(p) else f"{p:.3f}") for p in differences["p_value"]],
        units=[f"{row['n_units']} of {row['n_pairs']} (all: {row['mean_all']:+.2f})"
               for _, row in differences.iterrows()])
    table = shown.pivot_table(index=["task", "model", "metric"], columns="comparison",
                              values=["cell", "p", "units"], aggfunc="first", sort=False).fillna("")
    table = table.swaplevel(0, 1, axis=1).sort_index(axis=1, level=0, sort_remaining=False)
    names = {"cell": "difference [95% CI]", "p": "p", "units": "blocks tested of pairs"}
    table.columns = [f"{c}: {names[v]}" for c, v in table.columns]
    table.insert(0, "baseline vs floor", [floor_text(status, model, task) for task, model, _ in table.index])
    return table


_CROSS_VS_SAME = "cross-configuration − same-configuration"


def cyclic_partitions(ensembles: pd.DataFrame, metrics: Mapping[str, str]) -> pd.DataFrame:
    """The cross − same-configuration difference (:func:`dupbert.study.rq5.rq5_differences`) on
    ``metrics[task]`` on each of the ``k`` cyclic partitions of the seeds, with every rotation and
    rotation 0 alone: columns ``task, model, assignment, blocks from, blocks, difference [95% CI]``
    (points), ``p``, ``all pairs``, as strings."""
    cross = ensembles[ensembles["kind"] == "cross-configuration"]
    first = set(zip(cross.loc[cross["rotation"] == 0, "model"], cross.loc[cross["rotation"] == 0, "task"],
                    cross.loc[cross["rotation"] == 0, "pair"]))
    in_first = [kind == "single" or (m, t, p) in first
                for kind, m, t, p in zip(ensembles["kind"], ensembles["model"], ensembles["task"], ensembles["pair"])]
    rows = []
    for assignment, frame in (("every rotation", ensembles), ("rotation 0 only", ensembles[in_first])):
        for start in range(int(cross["k"].min())) if len(cross) else []:
            found = rq5_differences(frame, start=start)
            found = found[(found["comparison"] == _CROSS_VS_SAME)
                          & (found["metric"] == found["task"].map(metrics))]
            for row in found.itertuples():
                rows.append({"task": row.task, "model": row.model,
                             "assignment": assignment + (" (tested above)" if assignment == "every rotation"
                                                         and start == 0 else ""),
                             "blocks from": f"s{start}", "blocks": row.n_units,
                             "difference [95% CI]": interval_text(row.difference, row.ci_low, row.ci_high,
                                                                  signed=True),
                             "p": "" if pd.isna(row.p_value) else f"{row.p_value:.3f}"
                                  + (" (1 df: descriptive)" if row.n_units < 3 else ""),
                             "all pairs": f"{row.n_pairs}: {row.mean_all:+.2f}"})
    return pd.DataFrame(rows)


def partition_table(partitions: pd.DataFrame) -> pd.DataFrame:
    """:func:`cyclic_partitions` sorted by task and model, indexed by its first four columns."""
    return partitions.sort_values(["task", "model"], kind="stable").set_index(
        ["task", "model", "assignment", "blocks from"])


def robustness_table(partitions: pd.DataFrame) -> pd.DataFrame:
    """Per task and model of :func:`cyclic_partitions` (every rotation; index ``task, model``, in
    order of first appearance; cells with fewer than 2 partitions left out): the partitions, the
    difference's range (points), whether its sign holds (``"changes: not one to rely on"``
    otherwise), and in how many of those with at least 3 blocks it is nominally significant."""
    rows = []
    balanced = partitions[partitions["assignment"].str.startswith("every rotation")]
    for (task, model), group in balanced.groupby(["task", "model"], sort=False):
        group = group[group["difference [95% CI]"] != ""]
        values = [float(text.split()[0]) for text in group["difference [95% CI]"]]
        if len(values) < 2:
            continue
        holds = all(v > 0 for v in values) or all(v < 0 for v in values)
        tested = [float(p) for p, blocks in zip(group["p"], group["blocks"]) if p and blocks >= 3]
        rows.append({"task": task, "model": model, "partitions": len(values),
                     "range": f"{min(values):+.2f} to {max(values):+.2f}",
                     "sign": "holds" if holds else "changes: not one to rely on",
                     "nominally significant": (f"{sum(p < 0.05 for p in tested)} of {len(tested)}"
                                               if tested else "too few blocks to test")})
    return pd.DataFrame(rows, columns=["task", "model", "partitions", "range", "sign",
                                       "nominally significant"]).set_index(["task", "model"])


def every_partition_table(found: pd.DataFrame, status: pd.DataFrame) -> pd.DataFrame:
    """Per model and task (index ``task, model``) of
    :func:`dupbert.study.rq5.rq5_partition_differences`: partitions, the planned difference, range,
    median, how many positive and nominally significant (points)."""
    rows = []
    for (model, task), group in found.groupby(["model", "task"], sort=False):
        tested = group[group["n_units"] >= 3]
        planned = group[group["partition"] == 0]
        rows.append({
            "task": task, "model": model, "baseline vs floor": floor_text(status, model, task),
            "partitions": len(group),
            "blocks each": int(group["n_units"].iloc[0]),
            "planned (tested above)": "" if planned.empty else f"{planned['difference'].iloc[0]:+.2f}",
            "range": f"{group['difference'].min():+.2f} to {group['difference'].max():+.2f}",
            "median": f"{group['difference'].median():+.2f}",
            "positive": f"{(group['difference'] > 0).sum()} of {len(group)}",
            "nominal p < 0.05": (f"{(tested['p_value'] < 0.05).sum()} of {len(tested)}" if len(tested)
                                 else "too few blocks"),
        })
    return pd.DataFrame(rows).set_index(["task", "model"])


def unpartitioned(found: pd.DataFrame, differences: pd.DataFrame) -> str:
    """The cells (``"m on t, ..."``) of :func:`dupbert.study.rq5.rq5_differences` without partitions
    in ``found`` (:func:`dupbert.study.rq5.rq5_partition_differences`): their seeds do not cut into
    blocks of k, or they make one partition only; ``"none"`` when every cell has them."""
    shown = set(zip(found["model"], found["task"]))
    return ", ".join(f"{m} on {t}" for m, t in dict.fromkeys(zip(differences["model"], differences["task"]))
                     if (m, t) not in shown) or "none"


def paper_beside_table(summary: pd.DataFrame, ensembles: pd.DataFrame, trivial: Mapping) -> pd.DataFrame:
    """SQuAD 2.0 EM and F1 (index ``source, model, what``; strings): the paper's best ensemble and
    per model of ours the best single configuration, the ensembles' means, the best cross ensemble
    (picked on the evaluation data) and the trivial baseline.

    Args:
        summary: :func:`dupbert.study.rq5.rq5_summary`.
        ensembles: :func:`dupbert.study.rq5.rq5_ensembles`.
        trivial: :func:`dupbert.study.rq5.trivial_scores`.
    """
    rows = []
    for model, group in summary[summary["task"] == "squad2"].groupby("model", sort=False):
        stats = group.set_index(["kind", "metric"])
        cross = ensembles[(ensembles["model"] == model) & (ensembles["task"] == "squad2")
                          & (ensembles["kind"] == "cross-configuration")]
        for what, kind in (("best single configuration (mean over seeds)", "best single"),
                           ("cross-configuration ensembles (mean over disjoint seed blocks)", "cross-configuration"),
                           ("same-configuration ensembles (mean over disjoint seed blocks)", "same-configuration")):
            if (kind, "f1") in stats.index:
                rows.append({"source": "ours", "model": model, "what": what,
                             "EM": f"{stats.loc[(kind, 'exact'), 'mean']:.2f}",
                             "F1": f"{stats.loc[(kind, 'f1'), 'mean']:.2f}"})
        if len(cross):
            top = cross.loc[cross["metrics.f1"].idxmax()]
            rows.append({"source": "ours", "model": model,
                         "what": f"best of our {len(cross)} cross-configuration ensembles ({top['members']}; "
                                 "picked on the evaluation data)",
                         "EM": f"{top['metrics.exact']:.2f}", "F1": f"{top['metrics.f1']:.2f}"})
        rows.append({"source": "ours", "model": model, "what": "no answer to every question (trivial)",
                     "EM": f"{trivial.get((model, 'squad2', 'exact'), np.nan):.2f}",
                     "F1": f"{trivial.get((model, 'squad2', 'f1'), np.nan):.2f}"})
    rows.insert(0, {"source": "paper", "model": "ALBERT-based", "what": "best ensemble of duplication configurations",
                    "EM": f"{PAPER_SCORES['rq5-ensemble-squad2-exact']:.2f}",
                    "F1": f"{PAPER_SCORES['rq5-ensemble-squad2-f1']:.2f}"})
    rows.insert(1, {"source": "paper", "model": "ALBERT-based", "what": "its best single model",
                    "EM": NOT_STATED, "F1": NOT_STATED})
    return pd.DataFrame(rows).set_index(["source", "model", "what"])


def _comparison_cell(row: Mapping, pending: str) -> str:
    found = interval_text(row["difference"], row["ci_low"], row["ci_high"], signed=True)
    blocks = f"{row['n_units']} block{'s' if row['n_units'] != 1 else ''}"
    if pd.isna(row["p_value"]):
        return f"{found} on {blocks} (no test: fewer than 2 blocks; all {row['n_pairs']} pairs: {row['mean_all']:+.2f})"
    verdict = ("so far: more configurations are planned" if pending
               else "1 degree of freedom: descriptive only" if row["n_units"] < 3
               else "nominally significant, uncorrected" if row["p_value"] < 0.05 else "not significant")
    return f"{found} over {blocks} (p {row['p_value']:.3f}, {verdict})"


def _partitions_cell(found: pd.DataFrame, model: str, task: str) -> str:
    """The first comparison over every partition of the seeds (exploratory)."""
    cell = found[(found["model"] == model) & (found["task"] == task)]
    if len(cell) < 2:
        return ""
    tested = cell[cell["n_units"] >= 3]
    return (f"positive in {(cell['difference'] > 0).sum()} of {len(cell)}"
            + (f", nominally significant in {(tested['p_value'] < 0.05).sum()}" if len(tested) else ""))


FINDINGS_COLUMNS = ["metric", "baseline vs floor", "against same-configuration ensembles",
                    "over every partition of the seeds", "against the best single configuration",
                    "pending"]
"""The columns of :func:`findings_table`."""


def findings_table(summary: pd.DataFrame, differences: pd.DataFrame, partitions: pd.DataFrame,
                   waiting: pd.DataFrame, status: pd.DataFrame, metrics: Mapping[str, str]) -> pd.DataFrame:
    """RQ5's findings, one row per model and task (index ``model, task``, in the summary's order)
    on ``metrics[task]``: the cross-configuration ensembles' difference [95% CI] (points) over
    disjoint seed blocks against same-configuration ensembles of the same seeds and against the
    best single configuration, with p and its reading; the first over every partition of the
    seeds; the configurations still waiting for seeds. A cell whose baseline missed its floor says
    so and nothing else; one without ensembles says "too few seeds or configurations".

    Args:
        summary: :func:`dupbert.study.rq5.rq5_summary`; differences:
            :func:`dupbert.study.rq5.rq5_differences`; partitions:
            :func:`dupbert.study.rq5.rq5_partition_differences`; waiting:
            :func:`dupbert.study.rq5.complete_configurations`' second frame; status:
            ``dupbert.study.comparisons.learning_status``.
    """
    rows = []
    for (model, task), _ in summary.groupby(["model", "task"], sort=False):
        metric = metrics[task]
        row = dict.fromkeys(FINDINGS_COLUMNS, "")
        row.update(model=model, task=task, metric=metric, **{"baseline vs floor": floor_text(status, model, task)})
        found = differences[(differences["model"] == model) & (differences["task"] == task)
                            & (differences["metric"] == metric)].set_index("comparison")
        if not learned(status, model, task):
            row["against same-configuration ensembles"] = "says nothing about RQ5"
        elif found.empty:
            row["against same-configuration ensembles"] = "too few seeds or configurations for ensembles"
        else:
            pending = waiting_text(waiting, model, task)
            row["pending"] = pending
            if _CROSS_VS_SAME in found.index:
                row["against same-configuration ensembles"] = _comparison_cell(found.loc[_CROSS_VS_SAME], pending)
                row["over every partition of the seeds"] = _partitions_cell(partitions, model, task)
            if "cross-configuration − best single" in found.index:
                row["against the best single configuration"] = _comparison_cell(
                    found.loc["cross-configuration − best single"], pending)
        rows.append(row)
    return pd.DataFrame(rows, columns=["model", "task", *FINDINGS_COLUMNS]).set_index(["model", "task"])


# The chapter's plumbing: the paper's claims quoted, the runs it combines, the partitions shown, and
# the numbers its "What the numbers say" glues


def claim_quotes() -> str:
    """Markdown: the paper's RQ5 claims (its best ensemble's SQuAD 2.0 exact match, then F1), one
    line each, ``"> *<statement>* (<paper>, <source>)"``."""
    claims = [claim("rq5-ensemble-squad2-exact"), claim("rq5-ensemble-squad2-f1")]
    return "\n".join(f"> *{c.statement}* ({PAPER}, {c.source})" for c in claims)


def study_runs(results_paths: str | Sequence[str] | None,
               outputs_dirs: str | Sequence[str | None] | None = None,
               smoke_sweeps: Sequence[Mapping] = (),
               study_profile: str | os.PathLike | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs RQ5 combines, read as the chapter shows them, and the configurations that wait.

    Reads the RQ3 results files with their outputs folders
    (:func:`dupbert.study.rq5.study_files`, :func:`dupbert.study.ensemble.read_runs`; prints each
    file's outputs folder), or, with ``results_paths`` None, fine-tunes ``smoke_sweeps`` into a
    temporary folder first (:func:`dupbert.study.sweeps.run_smoke_sweeps`; prints how many runs).
    Then keeps per model and task only its most frequent setting
    (:func:`dupbert.study.comparisons.keep_main_setting`) and, with ``study_profile``, only the
    configurations whose planned seeds have all landed
    (:func:`dupbert.study.rq5.complete_configurations`); prints what each left out, if anything.

    Args:
        results_paths: RQ3 results files, from the repository root; None: run ``smoke_sweeps``.
        outputs_dirs: one outputs folder per results file; None: ``<results stem>-outputs``.
        smoke_sweeps: ``dupbert.study.sweeps.sweep`` arguments, one dict per sweep.
        study_profile: the RQ3 parameter file that planned the runs, from the repository root.

    Returns:
        ``(runs, waiting)``: the kept ``read_runs`` rows (plus ``setting``), and one
        :data:`dupbert.study.rq5.WAITING_COLUMNS` row per planned configuration still short of
        its seeds (none without ``study_profile``).

    Raises:
        FileNotFoundError, ValueError, ParameterError: as ``read_runs`` and ``study_files``; as
            ``read_profile`` for a bad ``study_profile``.
    """
    if results_paths is None:
        from ..study.sweeps import run_smoke_sweeps

        results_file, outputs_folder = run_smoke_sweeps(smoke_sweeps)
        runs = read_runs(results_file, outputs_folder)
        print(f"smoke sweep: {len(runs)} runs fine-tuned into a temporary folder, with their outputs")
    else:
        files = study_files(results_paths, outputs_dirs)
        runs = read_runs([path for _, path, _ in files], [folder for _, _, folder in files])
        for given, _, folder in files:
            print(f"{given}: outputs in {folder.relative_to(repository_path('.'))}")
    runs, dropped = keep_main_setting(runs)
    if dropped:
        print(f"{dropped} runs of other settings left out (each model and task keeps its most "
              "frequent setting)")
    plan = plan_sweep(read_profile(repository_path(study_profile), device="cpu"))[0] if study_profile else None
    runs, waiting = complete_configurations(runs, plan)
    if len(waiting):
        print("waiting for their planned seeds, left out until they have all landed: " + waiting_text(waiting))
    return runs, waiting


def show_partitions(partitions: pd.DataFrame) -> None:
    """Shows (IPython ``display``) :func:`partition_table` and :func:`robustness_table` of
    ``partitions`` (:func:`cyclic_partitions`), or prints that there is nothing to partition when
    it is empty."""
    from IPython.display import display

    if len(partitions):
        display(partition_table(partitions))
        display(robustness_table(partitions))
    else:
        print("No cross-configuration ensembles: nothing to partition.")


def glued_numbers(findings: pd.DataFrame, summary: pd.DataFrame, status: pd.DataFrame) -> dict:
    """Everything the chapter's "What the numbers say" glues, ``{glue name: value}`` in the
    chapter's order: ``rq5_findings`` (``findings``, :func:`findings_table`), ``rq5_answer`` (its
    columns "baseline vs floor" and "against same-configuration ensembles"), ``rq5_cells`` (its
    rows), ``rq5_informative`` (of those, the cells whose baseline learned), ``rq5_squad_cells``
    (models with SQuAD 2.0 in ``summary``, :func:`dupbert.study.rq5.rq5_summary`), and
    ``rq5_paper_exact`` and ``rq5_paper_f1``, the paper's best ensemble as ``"85.50"``.

    Args:
        status: ``dupbert.study.comparisons.learning_status`` of the runs.
    """
    return {
        "rq5_findings": findings,
        "rq5_answer": findings[["baseline vs floor", "against same-configuration ensembles"]],
        "rq5_cells": len(findings),
        "rq5_informative": int(sum(learned(status, m, t) for m, t in findings.index)),
        "rq5_squad_cells": int((summary.drop_duplicates(["model", "task"])["task"] == "squad2").sum()),
        **{f"rq5_paper_{metric}": f"{PAPER_SCORES[f'rq5-ensemble-squad2-{metric}']:.2f}"
           for metric in ("exact", "f1")},
    }
