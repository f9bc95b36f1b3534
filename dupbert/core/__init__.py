"""The foundations every other folder uses: the library's errors, input checks, the model zoo
(names, weights, pins, the cache), corpora, files and the results store (atomic writes, caches,
run records), and the statistics behind every interval and test."""
