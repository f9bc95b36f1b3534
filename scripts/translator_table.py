"""Identity vs linear translator (Din et al. 2023), per hidden state, on held-out sequences:
reconstruction and masked-prediction top-1 of each model's own head, one translator per model
fitted on the N_FIT sequences that follow the N_EVAL evaluated ones of its domain corpus.

    nice -n 15 env OMP_NUM_THREADS=1 python scripts/translator_table.py rxnmapper-albert [...]

Environment: N_EVAL (64), N_FIT (200), MAX_LENGTH (512). Prints one markdown table per model.
"""

import os
import sys
import time

import pandas as pd
import torch

from dupbert import (fit_translators, load_mlm, load_texts, masked_prediction_accuracy,
                     reconstruction_accuracy, split_texts)
from dupbert.core.data import default_corpus


def table(name: str, n_eval: int, n_fit: int, max_length: int) -> pd.DataFrame:
    model, tokenizer = load_mlm(name)
    split = split_texts(load_texts(default_corpus(name), n_eval + n_fit), n_eval)
    translator = fit_translators(model, tokenizer, split.fit, max_length=max_length)
    options = dict(progress=False, max_length=max_length)
    columns = {}
    for label, mapper in (("identity", "identity"), ("linear", translator)):
        columns[f"reconstruction {label}"] = reconstruction_accuracy(
            model, tokenizer, split.eval, translator=mapper, **options)["top1"]
        columns[f"masked {label}"] = masked_prediction_accuracy(
            model, tokenizer, split.eval, translator=mapper, **options)["top1"]
    frame = pd.DataFrame(columns).rename_axis("hidden state")
    print(f"\n{name} on {default_corpus(name)}: evaluated on the first {len(split.eval)} "
          f"sequences, translator fitted on the next {translator.n_sequences} "
          f"({translator.n_tokens} tokens), max_length {max_length}")
    return frame


if __name__ == "__main__":
    torch.set_num_threads(1)
    n_eval, n_fit = int(os.environ.get("N_EVAL", 64)), int(os.environ.get("N_FIT", 200))
    max_length = int(os.environ.get("MAX_LENGTH", 512))
    for model_name in sys.argv[1:]:
        start = time.time()
        print(table(model_name, n_eval, n_fit, max_length).round(4).to_markdown())
        print(f"({time.time() - start:.0f} s)")
