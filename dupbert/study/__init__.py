"""The study: a notebook's parameters and profiles, plans and sweeps of runs, the paper's claims
as data, comparisons with their verdict rules, variance components, the registered confirmatory
tests and the growth arm, RQ5's ensembles, and the results-at-a-glance rules."""
