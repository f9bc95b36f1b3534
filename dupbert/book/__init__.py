"""The book's own code: each chapter's tables and the numbers its Markdown prose glues, one module
per chapter (``notebooks/<chapter>.ipynb``). Prose lives in the notebooks' Markdown cells; these
modules only build tables and format numbers, from the frames of the analysis modules."""
