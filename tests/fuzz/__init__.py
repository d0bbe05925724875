"""A bad-input fuzzer: mutations of the lit corpus and the examples, run through loom-opt
and compiler.compile, each of which must end in a clean error or a checked result.

    pytest tests/fuzz                                  # a fixed sample (derandomized)
    HYPOTHESIS_PROFILE=long pytest tests/fuzz          # 5,000 random cases
    python -m tests.fuzz --cases 5000 --save DIR       # (from the repository root) a campaign,
                                                       # a summary table, a reproducer per failure
    python -m tests.fuzz --replay DIR/*.mlir           # which reproducers still fail

corpus.py: the seeds and a tokenizer; mutations.py: hypothesis strategies for text and
pipeline mutations; worker.py: the process that runs cases; oracle.py: the steps of a
case, the verdicts, the worker's time bound and restarts, reproducer files.
"""
