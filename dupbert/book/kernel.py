"""The first cell of every chapter notebook: its parameters, checked, in a kernel whose stored
outputs hold no stray stderr (nbval compares them, the book prints them)."""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from dupbert.study.params import ChapterParameters, chapter_parameters


def chapter(notebook: str, values: Mapping[str, Any]) -> ChapterParameters:
    """A chapter notebook's checked parameters (:func:`dupbert.study.params.chapter_parameters`),
    shown as a table, in a quiet kernel.

    Quiet: tqdm.auto warns on stderr when ipywidgets is absent (transformers imports it while the
    parameters are checked), and transformers logs and draws progress bars while models load and
    train; a chapter shows its own progress and notes instead. Figures are drawn inline (the
    ``%matplotlib inline`` magic: a glued figure keeps its image). Only this kernel is affected.

    Args:
        notebook: ``"rq1"`` ... ``"rq5"``, ``"emergence"`` or ``"glance"``.
        values: the notebook's variables (``globals()``).

    Raises:
        ParameterError, and the checks' errors: as :func:`~dupbert.study.params.chapter_parameters`.
    """
    __tracebackhide__ = True
    warnings.filterwarnings("ignore", message="IProgress not found")
    parameters = chapter_parameters(notebook, values)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.run_line_magic("matplotlib", "inline")
    return parameters
