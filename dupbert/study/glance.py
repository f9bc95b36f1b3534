"""Results at a glance: one row per claim of the paper (:data:`dupbert.study.paper.CLAIMS`), with the
paper's statement or number, ours with a 95% confidence interval, a verdict (:data:`VERDICTS`)
and the chapter that holds the evidence.

Each claim's rule, fixed before the runs, is in the function that decides it (:func:`rq1_rows`,
:func:`rq2_row`, :func:`rq3_rq4_rows`, :func:`rq5_rows`) and in prose in ``book/methods.md``
("Results at a glance"). Tasks the paper makes no claim about are shown, not judged
(:func:`beyond_the_paper`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from . import comparisons, paper
from ..core import significance
from ..training import tasks
from ..core.checks import check_columns, check_number
from ..core.errors import ParameterError
from ..training.model_card import clears_mlm_floor

VERDICTS = ("reproduced", "refuted", "undecided", "did not learn", "not testable here")
# Models whose MLM head is not a pretrained MLM head: shown, never counted in RQ1/RQ2 verdicts.
NOT_PRETRAINED_HEADS = {"splade-tiny-en"}
DECODES = 0.5  # RQ1: a hidden state is decoded when top-1 >= 0.5 ...
ABOVE_CONTROL = 0.1  # ... and its Wilson interval lies this far above the control's best layer
DID_NOT_LEARN_MLM = "did not learn (MLM)"
CHAPTERS = {1: "rq1", 2: "rq2", 3: "rq3", 4: "rq4", 5: "rq5"}
# The section of the chapter that holds a claim's evidence (its HTML anchor); others: SECTION.
SECTION = "what-the-numbers-say"
SECTIONS = {"rq1-holds-with-duplicated-layers": "reconstruction-through-duplicated-models",
            "rq5-ensemble-squad2-exact": "the-paper-beside-ours",
            "rq5-ensemble-squad2-f1": "the-paper-beside-ours"}
# Where the verdict rules are written out (book/methods.md, the "Results at a glance" section).
RULES_PAGE = "methods.html#methods-glance-rules"
COLUMNS = ["id", "rq", "claim", "paper", "ours", "verdict", "evidence", "section", "headline"]
HEADLINE_CHARS = 300  # the most a cell of the glance table holds


def wilson_interval(fraction: float, n: int) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion: ``fraction`` (in [0, 1]) of ``n`` trials succeeded.

    Raises:
        ValueError: ``n < 1`` or ``fraction`` outside [0, 1].
        ParameterError (a ValueError): ``n`` not an integer or ``fraction`` not a finite number.
    """
    from scipy.stats import binomtest

    check_number("n", n, integer=True)
    check_number("fraction", fraction)
    if n < 1 or not 0 <= fraction <= 1:
        raise ValueError(f"need n >= 1 and 0 <= fraction <= 1, got n={n}, fraction={fraction}")
    interval = binomtest(round(fraction * n), n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


# The tasks the paper makes a claim about; the others are shown, never judged.
CLAIMED_TASKS = frozenset(c.task for c in paper.CLAIMS if c.task is not None)




def _row(claim_id: str, ours: str, verdict: str, headline: str | None = None) -> dict:
    """One claim's row: ``ours`` the per-model detail, ``headline`` (default ``ours``) the one
    short statement of it that the glance table shows."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of {VERDICTS}")
    c = paper.claim(claim_id)
    return {"id": c.id, "rq": c.rq, "claim": c.statement, "paper": c.paper_value, "ours": ours,
            "verdict": verdict, "evidence": CHAPTERS[c.rq],
            "section": SECTIONS.get(c.id, SECTION), "headline": headline or ours}


def _weakest(found: Sequence[tuple]) -> str:
    """``(top1, low, high, layer, model, what)`` tuples: the weakest in words."""
    top1, low, high, layer, model, what = min(found)
    return (f"weakest of {len(found)} models: {model}{what} {top1:.3f} [{low:.3f}, {high:.3f}] "
            f"at hidden state {layer}")


def worst_block_output(rows: pd.DataFrame, what: str) -> tuple[float, float, float, int]:
    """The worst hidden state 1..L of ``rows``: ``(top1, low, high, layer)``."""
    inner = rows[rows["layer"] >= 1]
    if inner.empty:
        raise ParameterError(f"{what}: no hidden state 1..L (layer >= 1) in the table, nothing to "
                             "judge")
    undefined = inner[inner["top1"].isna()]
    if not undefined.empty:
        raise ParameterError(f"{what}: top1 is NaN at hidden state "
                             f"{int(undefined['layer'].iloc[0])}; the worst hidden state cannot "
                             "be chosen without it")
    worst = inner.loc[inner["top1"].idxmin()]
    if pd.notna(worst.get("top1_low", float("nan"))):  # bootstrap over sequences (the probe's)
        low, high = float(worst["top1_low"]), float(worst["top1_high"])
    else:  # a table from before the probe gave one: tokens counted as independent
        low, high = wilson_interval(float(worst["top1"]), int(worst["n_tokens"]))
    return float(worst["top1"]), low, high, int(worst["layer"])


def _rq1_verdict(checks: Sequence[tuple[float, float, float]]) -> str:
    """checks: (low, high, control best) of each model's worst hidden state."""
    if not checks:
        return "not testable here"
    if any(high <= control + ABOVE_CONTROL for _, high, control in checks):
        return "refuted"
    if all(low >= DECODES and low >= control + ABOVE_CONTROL for low, _, control in checks):
        return "reproduced"
    return "undecided"


def rq1_rows(reconstruction: pd.DataFrame, duplicated: pd.DataFrame | None = None) -> list[dict]:
    """The two RQ1 claims from the RQ1 chapter's tables.

    Rule: per model, its worst hidden state 1..L (the embedding output is reported, not judged):
    ``reproduced`` when, for every model, its Wilson lower bound is >= 0.5 and >= 0.1 above the best
    hidden state of its random-init control; ``refuted`` when some model's upper bound is within 0.1
    of its control; else ``undecided``. Models in ``NOT_PRETRAINED_HEADS`` are not judged.

    Args:
        reconstruction: ``probe_models(..., include_control=True)`` rows (``model, init, layer,
            top1, n_tokens``), top-1 as fractions.
        duplicated: ``probe_models(..., duplications=...)`` rows (``model, duplication, layer,
            top1, n_tokens``), or ``None``.

    Raises:
        ParameterError (a ValueError): a missing column, a judged model without pretrained hidden
            states 1..L, or a NaN top-1 among them.
    """
    check_columns(reconstruction, ["model", "init", "layer", "top1", "n_tokens"],
                  "reconstruction", rows="")
    if duplicated is not None:
        check_columns(duplicated, ["model", "duplication", "layer", "top1", "n_tokens"],
                      "duplicated", rows="")
    judged = [m for m in dict.fromkeys(reconstruction["model"]) if m not in NOT_PRETRAINED_HEADS]
    pretrained = reconstruction[reconstruction["init"] == "pretrained"]
    control = reconstruction[reconstruction["init"] == "random-init control"]
    control_best = {m: float(control.loc[control["model"] == m, "top1"].max()) for m in judged}
    texts, checks, found = [], [], []
    for model in judged:
        rows = pretrained[pretrained["model"] == model]
        top1, low, high, layer = worst_block_output(rows, f"{model} (pretrained)")
        found.append((top1, low, high, layer, model, ""))
        embedding = rows.loc[rows["layer"] == 0, "top1"]
        texts.append(f"{model}: {top1:.3f} [{low:.3f}, {high:.3f}] at hidden state {layer} "
                     f"(control at most {control_best[model]:.3f}; embedding output "
                     f"{float(embedding.iloc[0]):.3f})")
        checks.append((low, high, control_best[model]))
    rows = [_row("rq1-head-decodes-every-layer",
                 f"hidden states 1..L of {', '.join(judged)}; top-1 at the worst one: "
                 + "; ".join(texts),
                 _rq1_verdict(checks),
                 _weakest(found) + f"; random-init controls at most "
                 f"{max(control_best.values()):.3f}" if found else None)]
    if duplicated is None or duplicated.empty:
        rows.append(_row("rq1-holds-with-duplicated-layers", "no duplicated models probed",
                         "undecided"))
        return rows
    texts, checks, found = [], [], []
    for model in [m for m in dict.fromkeys(duplicated["model"]) if m in control_best]:
        variants = duplicated[(duplicated["model"] == model) & (duplicated["duplication"] != "baseline")]
        worst = None
        for name, rows_ in variants.groupby("duplication", sort=False):
            top1, low, high, layer = worst_block_output(rows_, f"{model} ({name})")
            if worst is None or top1 < worst[1]:
                worst = (name, top1, low, high, layer)
        if worst is None:  # only its baseline was probed: nothing duplicated to judge
            texts.append(f"{model}: no duplicated variant probed")
            continue
        name, top1, low, high, layer = worst
        found.append((top1, low, high, layer, model, f", {name},"))
        texts.append(f"{model}: {top1:.3f} [{low:.3f}, {high:.3f}] ({name}, hidden state {layer}; "
                     f"{variants['duplication'].nunique()} variants)")
        checks.append((low, high, control_best[model]))
    rows.append(_row("rq1-holds-with-duplicated-layers",
                     "top-1 at the worst hidden state 1..L of any duplicated variant: " + "; ".join(texts),
                     _rq1_verdict(checks), _weakest(found) if found else None))
    return rows


def rq2_row(spearman: pd.DataFrame, measure: str | None = None) -> dict:
    """The RQ2 claim from the RQ2 chapter's Spearman table (``model, similarity, rho, p_value,
    n_layers``, optionally ``rho_given_depth, p_value_given_depth``; a row per model and measure).

    The measure is the debiased linear CKA of each hidden state with the last one
    (``cka_debiased_to_last``, else ``cka_to_last``); the correlation with RQ1's top-1 is the
    partial one given depth where the table has it (both tend to rise with depth).

    Rule: ``reproduced`` when, for every model with a pretrained head, it is positive with
    p < 0.05; ``refuted`` when negative with p < 0.05 for some model; else ``undecided`` (also when
    CKA or top-1 is monotone in depth). Descriptive: hidden states are not independent samples.

    Raises:
        ParameterError (a ValueError): a missing column; ``measure`` not in ``similarity``.
    """
    check_columns(spearman, ["model", "similarity", "rho", "p_value", "n_layers"], "spearman",
                  rows="")
    if measure is not None and not spearman.empty and measure not in set(spearman["similarity"]):
        raise ParameterError(f"measure {measure!r} is not a similarity of the table; it has "
                             f"{list(dict.fromkeys(spearman['similarity']))}")
    if measure is None:
        measure = ("cka_debiased_to_last"
                   if (spearman["similarity"] == "cka_debiased_to_last").any() else "cka_to_last")
    partial = "rho_given_depth" in spearman.columns
    rows = spearman[(spearman["similarity"] == measure)
                    & ~spearman["model"].astype(str).str.split(" ").str[0].isin(NOT_PRETRAINED_HEADS)]
    rows = rows[rows["rho"].notna()]
    rho, p = ("rho_given_depth", "p_value_given_depth") if partial else ("rho", "p_value")

    def text(r) -> str:
        plain = f"{r.model}: rho {r.rho:+.2f} (p {r.p_value:.2g}, {int(r.n_layers)} hidden states)"
        if not partial:
            return plain
        given = getattr(r, rho)
        return plain + (", given depth: none (monotone in depth)" if pd.isna(given) else
                        f", given depth {given:+.2f} (p {getattr(r, p):.2g})")

    texts = [text(r) for r in rows.itertuples()]
    decided = rows[rows[rho].notna()]
    if rows.empty:
        verdict = "not testable here"
    elif ((decided[rho] < 0) & (decided[p] < 0.05)).any():
        verdict = "refuted"
    elif len(decided) == len(rows) and ((decided[rho] > 0) & (decided[p] < 0.05)).all():
        verdict = "reproduced"
    else:
        verdict = "undecided"
    headline = None
    if partial and len(rows):
        headline = ("rho given depth: " + (", ".join(
            f"{r.model} {getattr(r, rho):+.2f} (p {getattr(r, p):.2g})" for r in decided.itertuples())
            or "none") + f"; monotone in depth: {len(rows) - len(decided)} of {len(rows)} models")
    return _row("rq2-layers-distributed-similarly", "; ".join(texts) or "no correlations", verdict,
                headline)


def mlm_learned(quality: pd.DataFrame) -> dict[str, bool]:
    """Per model of a ``dupbert.training.quality.quality_table``: does its masked top-1 clear the MLM floor
    (``dupbert.training.model_card.clears_mlm_floor``)?

    Raises:
        ParameterError (a ValueError): a missing column.
    """
    check_columns(quality, ["model", "top1", "majority_top1"], "quality", rows="")
    return {str(r.model): clears_mlm_floor(r.top1, r.majority_top1) for r in quality.itertuples()}


def with_mlm_floor(reconstruction: pd.DataFrame, duplicated: pd.DataFrame | None,
                   spearman: pd.DataFrame | None, quality: pd.DataFrame) -> pd.DataFrame:
    """RQ1's and RQ2's claims judged twice, side by side: by the registered rule (every model with
    a pretrained head) and with the MLM floor (only the models that clear it, :func:`mlm_learned`;
    the others are listed as :data:`DID_NOT_LEARN_MLM`).

    Returns:
        One row per claim: ``id, claim, registered rule, with the MLM floor, judged on,
        did not learn (MLM)``.

    Raises:
        ParameterError (a ValueError): a judged model without a row in ``quality``; as
            :func:`rq1_rows` and :func:`rq2_row`.
    """
    learned = mlm_learned(quality)
    models = [m for m in dict.fromkeys(reconstruction["model"]) if m not in NOT_PRETRAINED_HEADS]
    missing = [m for m in models if m not in learned]
    if missing:
        raise ParameterError(f"no MLM quality for {missing}: the floor needs every judged model's "
                             f"masked top-1 (quality has {sorted(learned)})")
    keep = [m for m in models if learned[m]]

    def only(frame):
        return None if frame is None else frame[frame["model"].astype(str).str.split(" ").str[0]
                                                .isin(keep)]

    def verdicts(rows):
        return {row["id"]: row["verdict"] for row in rows}

    registered = rq1_rows(reconstruction, duplicated) + ([rq2_row(spearman)] if spearman is not None else [])
    floored = verdicts(rq1_rows(only(reconstruction), only(duplicated))
                       + ([rq2_row(only(spearman))] if spearman is not None else [])) \
        if keep else {}
    return pd.DataFrame([{
        "id": row["id"], "claim": row["claim"], "registered rule": row["verdict"],
        "with the MLM floor": floored.get(row["id"], "not testable here"),
        "judged on": ", ".join(keep) or "none",
        DID_NOT_LEARN_MLM: ", ".join(m for m in models if not learned[m]) or "none"}
        for row in registered])


def _interval(mean: float, low: float, high: float) -> str:
    if pd.isna(mean):
        return "n/a"
    return f"{mean:+.2f}" if pd.isna(low) else f"{mean:+.2f} [{low:+.2f}, {high:+.2f}]"


def _combine(verdicts: Sequence[str]) -> str:
    """Several models' verdicts on one claim: all that decided agree -> that verdict, else
    ``undecided``; ``did not learn`` when no model learned the task."""
    judged = [v for v in verdicts if v != comparisons.DID_NOT_LEARN]
    if not judged:
        return comparisons.DID_NOT_LEARN if verdicts else "not testable here"
    decided = {v for v in judged if v in ("reproduced", "refuted")}
    if len(decided) == 1 and all(v in decided for v in judged):
        return decided.pop()
    return "undecided"


def pilot_shortfalls(pilots: pd.DataFrame | None) -> dict[tuple[str, str], str]:
    """Model and task pairs whose every pilot run missed the learning floor, with a sentence each.

    Args:
        pilots: ``ResultsFile.frame()`` rows of baseline pilot runs (e.g.
            ``results/cpu/rq3-pilot-squad2.jsonl``), or ``None``.

    Returns:
        ``{(model, task): "did not learn in 2 pilots (best HasAns_f1 23.36 < floor 25); not
        run"}`` (points; the best pilot decides); pairs with a pilot at the floor are left out.

    Raises:
        ParameterError (a ValueError): ``pilots`` without ``model`` or ``task``; a pilot whose
            floor metric is missing, NaN or undefined (no answerable questions).
        KeyError: a task without a learning floor (:func:`dupbert.study.comparisons.learning_floor`).
    """
    if pilots is None or pilots.empty:
        return {}
    check_columns(pilots, ["model", "task"], "pilots", rows="")
    shortfalls = {}
    for (model, task), group in pilots.groupby(["model", "task"], sort=False):
        metric, floor = comparisons.learning_floor(task)
        column = f"metrics.{metric}"
        empty = tasks.empty_subset(group, metric)  # a SQuAD set without answerable questions
        if empty.any():
            seed = group.loc[empty, "seed"].iloc[0] if "seed" in group else None
            raise ParameterError(f"the pilot of {model} on {task}"
                                 f"{f' (seed {seed})' if seed is not None else ''} was evaluated "
                                 f"on a set without {metric.split('_', 1)[0]} questions: its "
                                 f"{metric}, the floor metric, is undefined; evaluate on a set "
                                 f"that has them")
        if column not in group:
            raise ParameterError(f"the pilots of {model} on {task} have no {column} column, the "
                                 f"floor metric of {task}")
        undefined = group[group[column].isna()]
        if not undefined.empty:
            seed = undefined["seed"].iloc[0] if "seed" in undefined else None
            raise ParameterError(f"the pilot of {model} on {task}"
                                 f"{f' (seed {seed})' if seed is not None else ''} has no "
                                 f"{metric} (NaN): the best pilot cannot be told without it")
        best = float(tasks.in_points(metric, group[column].astype(float)).max())
        if best < floor:
            n = len(group)
            shortfalls[model, task] = (f"did not learn in {n} pilot{'s' if n > 1 else ''} "
                                       f"(best {metric} {best:.2f} < floor {floor:.0f}); not run")
    return shortfalls


def _cell_text(cell, status: pd.DataFrame) -> tuple[str, str]:
    """A row of :func:`dupbert.study.comparisons.overall` in words, and its state: ``"judged"``,
    ``"pending"``, ``"no primary run"`` or ``did not learn``."""
    # overall() stores a missing primary as None, or NaN once another model has one
    has_primary = isinstance(cell.primary, str)
    if isinstance(cell.verdict, str) and cell.verdict.startswith("pending"):
        so_far = (f", {cell.primary} {_interval(cell.gain, cell.gain_ci_low, cell.gain_ci_high)}"
                  " points so far" if has_primary and pd.notna(cell.gain) else "")
        return f"{cell.model}: {cell.verdict}{so_far}", "pending"
    if not cell.learned:
        base = status[(status["model"] == cell.model) & (status["task"] == cell.task)]
        return (f"{cell.model}: did not learn (baseline {base.floor_metric.iloc[0]} "
                f"{base.baseline_mean.iloc[0]:.2f} < floor {base.floor.iloc[0]:.0f})"
                if not base.empty else f"{cell.model}: no baseline run"), comparisons.DID_NOT_LEARN
    if not has_primary:
        return f"{cell.model}: no primary run yet", "no primary run"
    return (f"{cell.model}: {cell.primary} "
            f"{_interval(cell.gain, cell.gain_ci_low, cell.gain_ci_high)} points "
            f"(p {cell.p_value:.3g}, {int(cell.n_pairs)} seeds)"), "judged"


def beyond_the_paper(summary: pd.DataFrame, status: pd.DataFrame,
                     planned_seeds: Mapping[tuple[str, str], int] | None = None) -> list[str]:
    """The primary comparisons on tasks the paper makes no claim about (e.g. USPTO-50k), in words:
    shown, never judged.

    Args:
        summary: :func:`dupbert.study.comparisons.overall` of the runs.
        status: :func:`dupbert.study.comparisons.learning_status` of the same runs.
        planned_seeds: ``{(model, task): seeds}`` of the pre-registered study.

    Returns:
        One text per model and task on its primary metric, in ``summary`` order, then the planned
        ones with no run (``pending (0/n seeds)``): ``"rxnmapper-albert on uspto50k: repeat
        shared +3 -3.90 [-7.10, -0.70] points (p 0.024, 8 seeds)"`` or its state.
    """
    texts = []
    for cell in summary.itertuples() if not summary.empty else []:
        if cell.task in CLAIMED_TASKS or cell.metric != tasks.task_metrics(cell.task)[0]:
            continue
        text, state = _cell_text(cell, status)
        planned = (planned_seeds or {}).get((cell.model, cell.task))
        if planned and state == "no primary run":
            text = f"{cell.model}: {comparisons.pending(0, planned)}"
        texts.append(f"{cell.model} on {cell.task}{text[len(cell.model):]}")
    landed = set(zip(summary["model"], summary["task"])) if not summary.empty else set()
    for (model, task), planned in (planned_seeds or {}).items():
        if task not in CLAIMED_TASKS and (model, task) not in landed:  # planned, nothing landed
            texts.append(f"{model} on {task}: {comparisons.pending(0, planned)}")
    return texts


def decisive_tests(tests: pd.DataFrame) -> dict[tuple[str, str], tuple[str, str | None]]:
    """Pre-registered confirmatory tests whose verdict becomes their model and task's claim
    verdict: ``{(model, task): (text, verdict)}`` from ``dupbert.study.comparisons.confirmatory_test``
    rows. ``verdict`` is the study's rule (``dupbert.core.significance.verdict``) with the paper's
    claimed gain for that task and metric, once every planned run has landed and the baseline
    learned; ``None`` before (the study's own verdict then stands).

    Raises:
        ParameterError (a ValueError): a missing column.
    """
    check_columns(tests, ["model", "task", "metric", "configuration", "n_pairs", "gain",
                          "gain_ci_low", "gain_ci_high", "p_value", "verdict"], "tests", rows="")
    decided = {}
    for r in tests.itertuples():
        claimed = [c for c in paper.CLAIMS if c.rq == 3 and c.task == r.task and c.metric == r.metric]
        waiting = str(r.verdict).startswith("pending") or r.verdict == comparisons.DID_NOT_LEARN
        if waiting or not claimed:
            decided[(r.model, r.task)] = (
                f"confirmatory test of {r.configuration}: {r.verdict}", None)
            continue
        verdict = significance.verdict(r.gain, r.gain_ci_low, r.gain_ci_high, r.p_value,
                                       claimed[0].claimed_gain)
        decided[(r.model, r.task)] = (
            f"decided by the confirmatory test of {r.configuration} on {int(r.n_pairs)} new seeds: "
            f"{_interval(r.gain, r.gain_ci_low, r.gain_ci_high)} (p {r.p_value:.2g}), {verdict}",
            verdict)
    return decided


def rq3_rq4_rows(results: pd.DataFrame,
                 planned_seeds: Mapping[tuple[str, str], int] | None = None,
                 pilots: pd.DataFrame | None = None,
                 decisive: Mapping[tuple[str, str], tuple[str, str | None]] | None = None
                 ) -> list[dict]:
    """The RQ3 and RQ4 claims from the fine-tuning runs (``ResultsFile.frame()`` rows of one
    setting).

    Rule per model and task: the verdict of its pre-registered primary comparison
    (:func:`dupbert.study.comparisons.overall`), or ``did not learn`` below the floor. Over models:
    :func:`_combine`; over the complete confirmatory tests alone where a claim has any.
    ``rq3-squad2-exact`` (no size stated): significantly positive -> ``reproduced``, negative ->
    ``refuted``. ``rq3-method`` over the claimed gains that learned
    (:func:`_over_learned`); ``rq4`` the same over every task claim, but ``not testable here`` in
    place of ``reproduced``/``undecided`` unless at least two models have a judged or pending
    primary comparison on the paper's tasks.

    Args:
        planned_seeds: ``{(model, task): seeds}`` (``dupbert.study.profiles.planned_seeds``): a model
            and task short of them is ``undecided`` ("pending (k/n seeds)"), and so is every
            claim it bears on.
        pilots: pilot runs (:func:`pilot_shortfalls`): a model and task neither run nor planned
            because its pilots missed the floor is ``did not learn``.
        decisive: :func:`decisive_tests`: a model and task's confirmatory test, shown after its
            study's primary, decides the claim's verdict once complete (as pre-registered: the
            other models' cells on the task are shown beside it, and do not change it).
    """
    table = comparisons.comparison(results, planned_seeds=planned_seeds) if not results.empty \
        else pd.DataFrame()
    summary = comparisons.overall(table) if not table.empty else pd.DataFrame()
    status = comparisons.learning_status(results) if not results.empty else pd.DataFrame()
    shortfalls = pilot_shortfalls(pilots)
    # (model, task) cells whose primary comparison is judged or pending: the RQ4 row names them
    rows, per_claim, judged_cells = [], {}, set()
    for c in paper.CLAIMS:
        if c.rq != 3 or c.task is None:
            continue
        cells = summary[(summary["task"] == c.task) & (summary["metric"] == c.metric)] \
            if not summary.empty else summary
        texts, verdicts, decided, short = [], [], [], []
        for cell in cells.itertuples() if not cells.empty else []:
            text, state = _cell_text(cell, status)
            texts.append(text)
            short.append(f"{cell.model}: {_interval(cell.gain, cell.gain_ci_low, cell.gain_ci_high)}"
                         f" ({int(cell.n_pairs)} seeds)" if state == "judged" else text)
            if state in ("judged", "pending"):  # a pending one may still be judged
                judged_cells.add((cell.model, c.task))
            if state != "judged":
                verdicts.append(comparisons.DID_NOT_LEARN if state == comparisons.DID_NOT_LEARN
                                else "undecided")
            elif c.claimed_gain is None:
                significant = pd.notna(cell.p_value) and cell.p_value < 0.05
                verdicts.append(("reproduced" if cell.gain > 0 else "refuted") if significant
                                else "undecided")
            else:
                verdicts.append(cell.verdict if cell.verdict in VERDICTS else "undecided")
            test_text, test_verdict = (decisive or {}).get((cell.model, c.task), (None, None))
            if test_text is not None:
                texts[-1] += f"; {test_text}"
                short[-1] = f"{cell.model}: {test_text.replace('decided by the ', '')}"
                if test_verdict is not None:
                    verdicts[-1] = test_verdict
                    decided.append(test_verdict)
        landed = set(cells["model"]) if not cells.empty else set()
        for (model, task), planned in (planned_seeds or {}).items():
            if task == c.task and model not in landed:  # planned, nothing landed yet
                judged_cells.add((model, task))
                texts.append(f"{model}: {comparisons.pending(0, planned)}")
                short.append(texts[-1])
                verdicts.append("undecided")
        for (model, task), text in shortfalls.items():
            if task == c.task and model not in landed and (model, task) not in (planned_seeds or {}):
                texts.append(f"{model}: {text}")
                short.append(texts[-1])
                verdicts.append(comparisons.DID_NOT_LEARN)
        verdict = _combine(decided or verdicts)
        per_claim[c.id] = verdict
        rows.append(_row(c.id, "; ".join(texts) or "no runs", verdict,
                         "; ".join(dict.fromkeys(short)) or None))
    gains = [v for cid, v in per_claim.items()
             if paper.claim(cid).claimed_gain not in (None, 0.0) and v != "not testable here"]
    method = _over_learned(gains)
    beyond = beyond_the_paper(summary, status, planned_seeds)
    ours = "; ".join(f"{cid}: {v}" for cid, v in per_claim.items())
    if beyond:
        ours += "; beyond the paper's tasks (shown, not judged): " + "; ".join(beyond)
    rows.insert(0, _row("rq3-method", ours, method, "; ".join(
        f"{paper.claim(cid).task} {paper.claim(cid).metric}: {v}" for cid, v in per_claim.items())))
    tested = [v for v in per_claim.values() if v != "not testable here"]
    consistent = _over_learned(tested)
    models = sorted(set(results["model"])) if not results.empty else []
    judged_models = sorted({model for model, _ in judged_cells})
    on = "; ".join(f"{m} ({', '.join(sorted(t for n, t in judged_cells if n == m))})"
                   for m in judged_models) or "none"
    ours = (f"{len(models)} models ({', '.join(models)}); judged on the paper's tasks (baseline "
            f"learned; primary complete or pending): {on}")
    if len(judged_models) < 2 and consistent in ("reproduced", "undecided"):
        ours += "; across models needs two such models: not testable with one"
        consistent = "not testable here"
    else:
        ours += "; per-claim verdicts as above"
    bodies = sorted({pretrained_body(m) for m in judged_models})
    rows.append(_row("rq4-consistent-across-models", ours, consistent,
                     f"judged on {len(judged_models)} models of {len(bodies)} pretrained "
                     f"bod{'y' if len(bodies) == 1 else 'ies'} ({', '.join(bodies) or 'none'})"))
    return rows


BODIES = {name: "all-MiniLM-L6-v2" for name in ("minilm-mlm-en", "minilm-mlm-en-continued",
                                                "minilm-mlm-en-grown", "albert-minilm-en")}
"""Models trained here from another model's pretrained body, and that body (RQ4 counts bodies)."""


def pretrained_body(model: str) -> str:
    """The pretrained body a model was made from (:data:`BODIES`); any other model is its own."""
    return BODIES.get(model, model)


def _over_learned(verdicts: Sequence[str]) -> str:
    """The verdict over several claims, ``did not learn`` ones left out: ``reproduced`` when every
    one is, ``refuted`` when one is, else ``undecided`` (``did not learn`` / ``not testable here``
    when none remain)."""
    if not verdicts:
        return "not testable here"
    learned = [v for v in verdicts if v != comparisons.DID_NOT_LEARN]
    if not learned:
        return comparisons.DID_NOT_LEARN
    if all(v == "reproduced" for v in learned):
        return "reproduced"
    return "refuted" if "refuted" in learned else "undecided"


def rq5_rows(summary: pd.DataFrame | None) -> list[dict]:
    """The two RQ5 claims: ``not testable here`` (no English ALBERT/BERT weights offline); our SQuAD
    2.0 ensembles are shown with their intervals.

    Args:
        summary: :func:`dupbert.study.rq5.rq5_summary` rows, or ``None``.

    Raises:
        ParameterError (a ValueError): ``summary`` with rows but lacking a column.
    """
    if summary is not None and not summary.empty:
        check_columns(summary, ["model", "task", "metric", "kind", "mean", "ci_low", "ci_high"],
                      "summary", rows="")
    rows = []
    for claim_id, metric in (("rq5-ensemble-squad2-exact", "exact"), ("rq5-ensemble-squad2-f1", "f1")):
        text = "no SQuAD 2.0 ensembles"
        if summary is not None and not summary.empty:
            cells = summary[(summary["task"] == "squad2") & (summary["metric"] == metric)]
            parts = []
            for model, group in cells.groupby("model", sort=False):
                kinds = group.set_index("kind")
                shown = [f"{kind} {kinds.loc[kind, 'mean']:.2f} [{kinds.loc[kind, 'ci_low']:.2f}, "
                         f"{kinds.loc[kind, 'ci_high']:.2f}]" for kind in kinds.index
                         if kind in ("cross-configuration", "same-configuration", "best single")
                         and pd.notna(kinds.loc[kind, "mean"])]
                if shown:  # a model whose SQuAD means are all NaN shows nothing
                    parts.append(f"{model}: " + ", ".join(shown))
            text = "; ".join(parts) or text
        rows.append(_row(claim_id, text, "not testable here"))
    return rows


def results_at_a_glance(reconstruction: pd.DataFrame | None, duplicated: pd.DataFrame | None,
                        spearman: pd.DataFrame | None, results: pd.DataFrame | None,
                        ensembles: pd.DataFrame | None,
                        planned_seeds: Mapping[tuple[str, str], int] | None = None,
                        pilots: pd.DataFrame | None = None,
                        decisive: Mapping[tuple[str, str], tuple[str, str | None]] | None = None
                        ) -> pd.DataFrame:
    """One row per claim of :data:`dupbert.study.paper.CLAIMS`, in that order.

    Returns:
        :data:`COLUMNS` ``id, rq, claim, paper, ours, verdict, evidence, section`` (``evidence``:
        the chapter's page, e.g. ``rq3``; ``section``: the anchor holding the evidence). Claims
        whose inputs are ``None`` are ``not testable here``, "not run". ``planned_seeds``,
        ``pilots``, ``decisive``: as :func:`rq3_rq4_rows`.

    Raises:
        AssertionError: a claim got two rows (a bug).
    """
    rows = []
    if reconstruction is not None:
        rows += rq1_rows(reconstruction, duplicated)
    if spearman is not None:
        rows.append(rq2_row(spearman))
    if results is not None:
        rows += rq3_rq4_rows(results, planned_seeds, pilots, decisive)
    rows += rq5_rows(ensembles)
    by_id = {}
    for row in rows:
        assert row["id"] not in by_id, f"claim {row['id']} decided twice"
        by_id[row["id"]] = row
    ordered = [by_id.get(c.id) or _row(c.id, "not run", "not testable here")
               for c in paper.CLAIMS]
    return pd.DataFrame(ordered, columns=COLUMNS)


def verdict_counts(table: pd.DataFrame) -> Mapping[str, int]:
    """How many claims got each verdict (zeros included); ParameterError without ``verdict``."""
    check_columns(table, ["verdict"], "table", rows="")
    counts = table["verdict"].value_counts()
    return {v: int(counts.get(v, 0)) for v in VERDICTS}




SHORT_CLAIMS = {
    "rq1-head-decodes-every-layer": "The MLM head decodes every hidden state",
    "rq1-holds-with-duplicated-layers": "... also with duplicated layers",
    "rq2-layers-distributed-similarly": "Because the layers are distributed alike",
    "rq3-method": "Duplicating layers, then fine-tuning, helps",
    "rq3-squad2-f1": "SQuAD 2.0 F1 gain",
    "rq3-squad2-exact": "SQuAD 2.0 EM gain",
    "rq3-snli-accuracy": "SNLI accuracy gain",
    "rq3-sst2-accuracy": "No gain on SST-2",
    "rq4-consistent-across-models": "The gain holds across models and tasks",
    "rq5-ensemble-squad2-exact": "Ensemble, SQuAD 2.0 EM",
    "rq5-ensemble-squad2-f1": "Ensemble, SQuAD 2.0 F1",
}
"""Each claim in a few words, for the glance table (the full statement is in the detail)."""


def glance_html(table: pd.DataFrame, later: Mapping[str, str] | None = None) -> str:
    """The results-at-a-glance table as one HTML ``<table>``, a short row per claim (HTML-escaped):
    the claim in a few words (:data:`SHORT_CLAIMS`), the paper's number, ours (the row's
    ``headline``), the verdict linking to ``{evidence}.html#{section}``, and ``later`` (claim id
    to text: the verdicts of the readings added after registration); each row has the class
    ``verdict-<verdict, spaces as hyphens>`` (``book/_static/dupbert.css``); the header links to
    :data:`RULES_PAGE`. Below it, a collapsed ``<details>`` holds every claim's full statement
    and per-model detail (``ours``).

    Args:
        table: :func:`results_at_a_glance` rows.

    Raises:
        ParameterError (a ValueError): ``table`` lacking a column.
    """
    import html

    check_columns(table, ["id", "rq", "claim", "paper", "headline", "verdict", "evidence",
                          "section"], "table", rows="")
    e = html.escape
    later = later or {}
    rows = "".join(
        f'<tr class="verdict-{e(r.verdict.replace(" ", "-"))}">'
        f"<td>{e(SHORT_CLAIMS.get(r.id, r.claim))}</td>"
        f"<td>{e(str(r.paper))}</td><td>{e(str(r.headline))}</td>"
        f"<td><strong>{e(r.verdict)}</strong> "
        f'(<a href="{e(r.evidence)}.html#{e(r.section)}">RQ{int(r.rq)}</a>)</td>'
        f"<td>{e(later.get(r.id, '-'))}</td></tr>"
        for r in table.itertuples())
    header = ("<th>claim</th><th>paper</th><th>ours (95% CI)</th>"
              f'<th>verdict (<a href="{RULES_PAGE}">rules</a>)</th><th>later readings</th>')
    details = "".join(f"<dt><code>{e(r.id)}</code> {e(r.claim)}</dt><dd>{e(str(r.ours))}</dd>"
                      for r in table.itertuples())
    return (f'<table class="results-at-a-glance table"><thead><tr>{header}</tr></thead>'
            f"<tbody>{rows}</tbody></table>"
            f'<details class="glance-detail"><summary>Every model, claim by claim</summary>'
            f"<dl>{details}</dl></details>")


def later_readings(floor: pd.DataFrame | None = None, whole: pd.DataFrame | None = None,
                   two_way: pd.DataFrame | None = None, table: pd.DataFrame | None = None
                   ) -> dict[str, str]:
    """The glance table's "later readings": per claim id, the verdicts of the rules added after
    registration, dated, each in a few words.

    Args:
        floor: :func:`with_mlm_floor` with the registered MLM-quality measure (2026-12-02).
        whole: :func:`with_mlm_floor` with the measure on the whole held-out set (2026-12-06).
        two_way: ``dupbert.study.variance.two_way_table`` / ``dupbert.study.studies.later_two_way`` rows
            (2026-12-06): the claim's deciding cell (the one with most seeds per task) is read.
        table: :func:`results_at_a_glance` rows: RQ4 counted in pretrained bodies (2026-12-06).
    """
    later: dict[str, list[str]] = {}
    for frame, label in ((floor, "MLM floor (2026-12-02)"),
                         (whole, "floor on the whole held-out set (2026-12-06)")):
        for r in frame.to_dict("records") if frame is not None else []:
            n = 0 if r["judged on"] == "none" else len(r["judged on"].split(", "))
            later.setdefault(r["id"], []).append(f"{label}: {r['with the MLM floor']} on {n} models")
    claims = {("snli", "accuracy"): "rq3-snli-accuracy", ("sst2", "accuracy"): "rq3-sst2-accuracy"}
    if two_way is not None and len(two_way):
        cells = two_way[two_way["duplication"].eq("copy first 3")
                        & two_way["model"].eq("all-MiniLM-L6-v2")]
        for task, part in cells.groupby("task"):
            r = part.sort_values("n_pairs").iloc[-1]
            claim = claims.get((task, "accuracy"))
            if claim is None:
                continue
            text = (f"both errors (2026-12-06): {r['verdict_two_way']} "
                    f"[{r['two_way_low']:+.2f}, {r['two_way_high']:+.2f}]")
            if r['verdict_two_way'] == "undecidable on this evaluation set":
                text = (f"both errors (2026-12-06): undecidable here, no margin under "
                        f"{r['decidable_margin']:.2f} points")
            symmetric = r.get("verdict_symmetric")
            if isinstance(symmetric, str):
                text += f"; symmetric rule: {symmetric}"
            later.setdefault(claim, []).append(text)
        if "rq3-snli-accuracy" in later:
            later.setdefault("rq3-method", []).append(
                "scoped (2026-12-06): refuted for copy first 3 on all-MiniLM-L6-v2 (NLI-trained) "
                "x SNLI")
    if table is not None:
        rq4 = table[table["id"] == "rq4-consistent-across-models"]
        if len(rq4) and " 1 pretrained body " in str(rq4["headline"].iloc[0]):
            later.setdefault("rq4-consistent-across-models", []).append(
                "in pretrained bodies (2026-12-06): not testable here, one body")
    return {claim: "; ".join(texts) for claim, texts in later.items()}
