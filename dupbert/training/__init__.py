"""Training: the fine-tuning tasks with their metrics and floors (SQuAD 2.0 EM/F1 included),
fine-tuning one run, the MLM-quality measure, and pretraining from random init with its
emergence record and model cards."""
