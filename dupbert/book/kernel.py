"""The first cell of every chapter notebook: its parameters, checked and set as the notebook's
variables, in a kernel whose stored outputs hold no stray stderr (nbval compares them, the book
prints them)."""

from __future__ import annotations

import warnings
from typing import Any, MutableMapping

from dupbert.study.params import ChapterParameters, chapter_parameters


def chapter(notebook: str, values: MutableMapping[str, Any]) -> ChapterParameters:
    """A chapter notebook's checked parameters (:func:`dupbert.study.params.chapter_parameters`),
    shown as a table, in a quiet kernel; ``values`` is updated with the checked values
    (:meth:`~dupbert.study.params.ChapterParameters.values`), which the cells below read as
    variables.

    Quiet: tqdm.auto warns on stderr when ipywidgets is absent (transformers imports it while the
    parameters are checked), and transformers logs and draws progress bars while models load and
    train; a chapter shows its own progress and notes instead. No
    :class:`~dupbert.tools.hidden.TruncationWarning` is shown: sequences longer than
    ``max_length`` (or than the positions a model takes) are cut, as each chapter's text says.
    Figures are drawn inline (the ``%matplotlib inline`` magic: a glued figure keeps its image).
    Only this kernel is affected.

    Args:
        notebook: ``"rq1"`` ... ``"rq5"``, ``"emergence"`` or ``"glance"``.
        values: the notebook's variables (``globals()``), updated in place.

    Raises:
        ParameterError, and the checks' errors: as :func:`~dupbert.study.params.chapter_parameters`.
    """
    __tracebackhide__ = True
    warnings.filterwarnings("ignore", message="IProgress not found")
    parameters = chapter_parameters(notebook, values)
    values.update(parameters.values())
    from dupbert.tools.hidden import TruncationWarning  # after the filter: it imports tqdm.auto

    warnings.filterwarnings("ignore", category=TruncationWarning)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.run_line_magic("matplotlib", "inline")
    return parameters
