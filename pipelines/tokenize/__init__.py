"""``python -m pipelines.tokenize``: JSONL/Parquet in, Megatron ``.bin/.idx`` shards out.

One shard per input file and json key: ``{stem}_{key}_{document|sentence}_dc=N_sc=N_tc=N``,
byte-identical to Megatron-LM's ``tools/preprocess_data.py`` for the same input and tokenizer
settings, whatever the runner, ``--workers`` or retries. Rerunning the same command skips shards
already committed with the same inputs, tokenizer and options; ``--dry-run`` prints the plan.
See DESIGN.md for the data flow and dataio/sink.py for the commit protocol.

One run at a time per output folder (dataio/lock.py); its temporaries live under
``_temporary/{run id}/``. Everything a user can get wrong (the output, the tokenizer files) is
checked before any input is read.

Exit status (runtime/errors.py): 0 when every planned shard is committed; 1 when some shard
failed (they are listed), the data or the run failed, or another run holds the output; 2 for a
bad command line or configuration; 130 / 143 when interrupted by SIGINT / SIGTERM (rerun the
same command to resume). Anticipated failures print one line, never a traceback.

The package, in the order of a run (none of its modules but graph.py imports Beam):

- ``driver.py``: :func:`run` / :func:`main` (the command), :func:`prepare` and :func:`complete`,
  which every launcher calls (runners/spark.py too), so the order of a run is written once;
- ``checks.py``: what is refused before anything is read or written;
- ``planner.py``: inputs, tokenizer and options in, a :class:`~pipelines.tokenize.planner.Job`
  out (every shard's name, fingerprint, skip or write); ``--dry-run``'s plan;
- ``estimate.py``: ``--dry-run``'s sampled estimates;
- ``graph.py``: the Beam graph (``build``) and running it here (``run``);
- ``outcome.py``: after the pipeline: ``finish`` (metadata.json) and ``report`` (the summary).
"""

from pipelines.tokenize.driver import Run, complete, execute, main, prepare, run, setup
from pipelines.tokenize.planner import Job, plan

__all__ = ["Job", "Run", "complete", "execute", "main", "plan", "prepare", "run", "setup"]
