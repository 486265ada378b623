"""Scale-out on paper: wall time and node-hours of 1 TB and 10 TB on 10 and 100 nodes of 64 cores,
projected from figures measured on this machine, with the first bottleneck named at each size.

    python bench/scale_model.py                       # measure (a few minutes), then project
    python bench/scale_model.py --files 2000 --no-azurite --tokenize-mb 20      # quicker
    python bench/scale_model.py --no-measure          # project from the defaults below only

Measured here (the machine's load average is printed beside each figure: on a shared 2-core
host a wall time is an upper bound; the tokenize rate is per CPU-second, which load hardly moves):

- tokenize rate per core, per backend: a generated multilingual corpus (``pipelines.demo``),
  a byte-level BPE trained on it, every text in memory, ``encode_batch`` in batches of 2048, in a
  child process pinned to one CPU (``sched_setaffinity``; one thread), MB of text per CPU-second.
  ``fast`` = gigatoken, ``reference`` = HuggingFace ``tokenizers``, as in bench/throughput.py.
- driver planning for ``--files`` (10,000) small generated input files on local disk:
  ``pipelines.tokenize``'s ``setup`` + ``plan`` + work items in a fresh process, and the whole
  ``--dry-run`` command (which also samples 1 MB of every file to estimate its tokens).
- on Azurite, when provisioned (``.cache/azurite``; started on a free port, stopped by PID, as
  tests/e2e/azure/conftest.py does): listing ``--files`` blobs; ``plan`` of a job whose inputs are
  those blobs and whose output is on Azurite; the cost of one request (a blob's properties),
  which is what every per-file or per-shard call costs; and the commit of one shard (the sink's
  finalize step on a one-part shard: merge into the final name, commit record, clean-up).

Taken as inputs (flags; defaults from the measurements in docs/, or from Azure's published
limits, each said where it comes from): the per-job fixed cost of SLURM + Flink (about 60 s: "a
job pays about 30 s of Flink, job-server and worker-pool start-up and teardown plus about 28 s
of job submission", docs/slurm-flink.md) and of Spark (51 s submit to exit through Livy for a
one-document job in a busy run; 16 to 59 s with the load, docs/spark.md "Figures"); the pipeline's efficiency
against the in-memory tokenizer (0.69: the whole job on 708 MB, 67.59 MB/s, against gigatoken in
memory, 97.83 MB/s, both on the same 2 cores, docs/benchmarks.md "Throughput"); per-node network bandwidth
and the storage account's egress and ingress limits. Without a measurement, the tokenize rate
and tokens per byte are docs/scaling.md's "Measured inputs" (65.5 MB per core-second, 0.179).

The model (one tokenize job; D bytes of text, N nodes of c cores, C = N*c worker slots):

- work items: an uncompressed JSONL file is cut into ``--split-bytes`` (256 MiB) ranges; a
  ``.jsonl.gz``/``.zst`` file is one item however large (a stream cannot be entered in the
  middle); Parquet 8 row groups per item. Items run ``ceil(items / C)`` waves; a wave lasts as
  long as its largest item: ``compute = waves * item / (rate * efficiency)``. Against the even
  spread ``D / (C * rate * efficiency)`` the excess is *input skew*.
- storage: inputs read at ``min(N * node_gbps, account egress)``; parts and final shards (2 *
  tokens * 2 bytes) written at ``min(N * node_gbps, account ingress)``; overlapped with compute:
  the data phase takes ``max(compute, read, write)``.
- driver, serial: planning (``files *`` the measured planning time per file, listings
  included) before the job; per shard, ``requests_before`` (2: clear its failure record and its
  errors file, pipelines/tokenize/driver.py ``prepare_output``) and, after the run, none where the
  runner hands the sink's results back (Beam metrics: the local runner and Flink do, while the
  string sets that carry them stay under Beam's 1 MB cap, about ``RESULTS_CAP_SHARDS``
  shards) or ``requests_after`` (3: read the commit record, look for a failure record and an
  errors file, dataio/manifest.py) where the records are read instead (Spark's jar runs the
  finish step on the cluster; a larger job); times the request time, one after the other.
- commits: ``shards * commit / min(C, shards)`` (shards are finalized on workers in parallel).
- job start-up: the runner's fixed cost, once.
- wall = start-up + planning + data phase + commit + driver after; node-hours = N * wall / 3600.

The bottleneck named is the largest of: tokenize compute (the even spread), input skew (what the
largest items add to it), storage bandwidth (what reading and writing add beyond compute),
Blob requests on the driver (planning + per-shard requests + commits), job start-up.
Request times on Azurite (same host, no network) are a floor; Azure in-region requests take
several milliseconds (``--request-ms`` overrides the measured value for the projection).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints

ACCOUNT = "devstoreaccount1"
# Azurite's fixed, public development key (documented by Microsoft; not a secret).
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def load() -> str:
    return "load %.2f" % os.getloadavg()[0]


def say(text: str) -> None:
    print(text, flush=True)


# --- measurements --------------------------------------------------------------------------------

def make_corpus(folder: str, mb: float) -> tuple[list[str], str]:
    """~mb MB of multilingual JSONL in one file, and a byte-level BPE (8k) trained on it."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "corpus.jsonl")
    if not os.path.exists(path):
        size = 0
        with open(path, "w", encoding="utf-8") as f:
            for rec in demo.documents(7, 10**9, long_every=211, empty_every=97):
                line = json.dumps(rec, ensure_ascii=False) + "\n"
                f.write(line)
                size += len(line.encode())
                if size >= mb * MB:
                    break
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    tok = os.path.join(folder, "bpe")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        demo.train_bpe(texts[:5000], tok, vocab_size=8000)
    return [path], tok


_RATE = r"""
import json, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[3])})
texts = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")]
nbytes = sum(len(t.encode()) for t in texts)
path = os.path.join(sys.argv[2], "tokenizer.json")
if sys.argv[4] == "reference":
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(path)
    encode = lambda b: sum(len(e.ids) for e in tok.encode_batch_fast(b, add_special_tokens=False))
else:
    import gigatoken
    tok = gigatoken.Tokenizer(path)
    encode = lambda b: len(tok.encode_batch(b).layout.content)
encode(texts[:64])  # warm up
wall, cpu, n = time.perf_counter(), time.process_time(), 0
for i in range(0, len(texts), 2048):
    n += encode(texts[i:i + 2048])
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"bytes": nbytes, "tokens": n, "wall": wall, "cpu": cpu}))
"""


def measure_tokenize(paths: list[str], tok: str, backend: str) -> dict:
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "RAYON_RS_NUM_CPUS": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    cpu = sorted(os.sched_getaffinity(0))[-1]
    before = load()
    out = subprocess.run([sys.executable, "-c", _RATE, paths[0], tok, str(cpu), backend],
                         capture_output=True, text=True, env=env, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    mb = r["bytes"] / MB
    return {"mb_per_cpu_s": mb / r["cpu"], "mb_per_wall_s": mb / r["wall"],
            "tokens_per_byte": r["tokens"] / r["bytes"], "mb": mb, "load": before}


def make_many_files(folder: str, count: int) -> str:
    """``count`` small JSONL files (3 short documents each)."""
    corpus = os.path.join(folder, f"many_{count}")
    if os.path.exists(os.path.join(corpus, f"part_{count - 1:05d}.jsonl")):
        return corpus
    os.makedirs(corpus, exist_ok=True)
    rng = random.Random(0)
    for i in range(count):
        with open(os.path.join(corpus, f"part_{i:05d}.jsonl"), "w", encoding="utf-8") as f:
            for _ in range(3):
                f.write(json.dumps({"text": demo.document(rng, "en", sentences=3)}) + "\n")
    return corpus


_PLAN = r"""
import json, sys, time
t0 = time.perf_counter()
from pipelines import tokenize
argv, options, storage = tokenize.setup(json.loads(sys.argv[1]))
t1 = time.perf_counter()
job = tokenize.plan(options, checked=True)
items = job.items()
t2 = time.perf_counter()
print(json.dumps({"setup": t1 - t0, "plan": t2 - t1, "files": len(job.files),
                  "shards": len(job.shards), "items": len(items),
                  "skipped": sum(s.skip for s in job.shards)}))
"""


def tokenize_argv(inputs: str, output: str, tok: str, *extra: str) -> list[str]:
    return ["--input", inputs, "--output", output, "--tokenizer-type", "HuggingFaceTokenizer",
            "--tokenizer-model", tok, "--json-keys", "text", "--append-eod", "--log-interval",
            "0", *extra]


def measure_plan(argv: list[str], env=None, cwd=ROOT, timeout: float = 900) -> dict:
    before = load()
    try:
        out = subprocess.run([sys.executable, "-c", _PLAN, json.dumps(argv)],
                             capture_output=True, text=True, env=env or os.environ.copy(),
                             cwd=cwd, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"plan": float("inf"), "note": f"over {timeout:.0f} s", "load": before,
                "files": None, "skipped": None, "items": None, "setup": None}
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["load"] = before
    return r


def measure_dry_run(argv: list[str], timeout: float) -> dict:
    before = load()
    t = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "pipelines.tokenize", *argv, "--dry-run"],
                       capture_output=True, text=True, cwd=ROOT, check=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "load": before, "note": f"over {timeout:.0f} s"}
    return {"seconds": time.perf_counter() - t, "load": before}


_FAKE_COMMITS = r"""
import json, os, sys
from pipelines import tokenize
from dataio import fs as fsutil
from dataio import manifest as commits
argv, options, storage = tokenize.setup(json.loads(sys.argv[1]))
job = tokenize.plan(options, checked=True)
for s in job.shards:  # what a finished run leaves: record + files of the recorded sizes
    name = s.shard + "_dc=3_sc=3_tc=99"
    for suffix in (".bin", ".idx"):
        with open(os.path.join(job.output, name + suffix), "wb") as f:
            f.write(b"x" * 10)
    record = {"shard": s.shard, "name": name, "fingerprint": s.fingerprint, "documents": 3,
              "sequences": 3, "tokens": 99, "bin_size": 10, "idx_size": 10}
    fsutil.write_bytes_atomic(commits.commit_record_path(job.output, s.shard),
                              json.dumps(record).encode())
"""


def fake_commits(corpus: str, output: str, tok: str) -> None:
    """Every shard of the job committed, as a finished run leaves them (records and files)."""
    if os.path.isdir(os.path.join(output, "_commits")):
        return
    os.makedirs(output, exist_ok=True)
    code = _FAKE_COMMITS
    try:
        import dataio.manifest  # noqa: F401
    except ImportError:  # before the records moved out of dataio/sink.py
        code = code.replace("from dataio import manifest as commits",
                            "from dataio import sink as commits")
    subprocess.run([sys.executable, "-c", code, json.dumps(tokenize_argv(corpus, output, tok))],
                   capture_output=True, text=True, cwd=ROOT, check=True)


class Azurite:
    """An Azurite blob service on 127.0.0.1 with a port the OS picks, stopped by PID."""

    def __init__(self, folder: str):
        import re

        binary = os.path.join(ROOT, ".cache", "azurite", "node_modules", ".bin", "azurite-blob")
        if not os.path.exists(binary) or shutil.which("node") is None:
            raise FileNotFoundError("Azurite is not provisioned (.cache/azurite) or node is "
                                    "missing: bash scripts/setup.sh --test")
        os.makedirs(os.path.join(folder, "data"), exist_ok=True)
        self._log = open(os.path.join(folder, "azurite.out"), "w+")
        self.proc = subprocess.Popen(
            [binary, "--blobHost", "127.0.0.1", "--blobPort", "0", "--location",
             os.path.join(folder, "data"), "--skipApiVersionCheck", "--disableTelemetry",
             "--loose"], stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        pattern = re.compile(r"successfully listens on http://127\.0\.0\.1:(\d+)")
        for _ in range(600):
            self._log.seek(0)
            match = pattern.search(self._log.read())
            if match:
                self.port = int(match.group(1))
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("Azurite did not start")

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
                f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};")

    def url(self, container: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}/{container}/{path}".rstrip("/")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def upload_many(azurite: Azurite, container: str, local_corpus: str, count: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    service.create_container(container)
    client = service.get_container_client(container)
    names = sorted(os.listdir(local_corpus))[:count]

    def put(name):
        with open(os.path.join(local_corpus, name), "rb") as f:
            client.upload_blob(f"corpus/{name}", f.read(), overwrite=True)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, names))


def measure_azurite(work: str, local_corpus: str, count: int, tok: str, *,
                    compare_with: str | None = None) -> dict:
    """Listing, one request, planning and one shard's commit on Azurite."""
    import numpy as np

    from dataio import azure
    from dataio import fs as fsutil

    azurite = Azurite(os.path.join(work, "azurite"))
    out: dict = {}
    try:
        t = time.perf_counter()
        upload_many(azurite, "scale", local_corpus, count)
        say(f"  uploaded {count} blobs in {time.perf_counter() - t:.1f} s ({load()})")
        os.environ["AZURE_STORAGE_CONNECTION_STRING"] = azurite.connection_string
        azure.configure_from_options({"azure_connection_string": azurite.connection_string},
                                     paths=[azurite.url("scale")])
        corpus = azurite.url("scale", "corpus")
        before = load()
        t = time.perf_counter()
        listed = fsutil.glob_details(corpus + "/*.jsonl")
        out["list"] = {"seconds": time.perf_counter() - t, "blobs": len(listed), "load": before}
        say(f"  listing {len(listed)} blobs: {out['list']['seconds']:.2f} s ({before})")
        sample = sorted(listed)[:300]
        before = load()
        t = time.perf_counter()
        for url in sample:
            fsutil.info(url)
        out["request"] = {"ms": (time.perf_counter() - t) / len(sample) * 1e3, "load": before}
        say(f"  one request (blob properties): {out['request']['ms']:.2f} ms ({before})")
        out["plan"] = measure_plan(tokenize_argv(corpus, azurite.url("scale", "out"), tok,
                                                 "--no-verify-inputs"))
        say(f"  plan of {out['plan']['files']} blob inputs, output on Azurite: "
            f"{out['plan']['plan']:.2f} s ({out['plan']['load']})")
        if compare_with:
            r = measure_plan(tokenize_argv(corpus, azurite.url("scale", "out"), tok,
                                           "--no-verify-inputs"), cwd=compare_with, timeout=420)
            say(f"    before ({compare_with}): {r['plan']:.2f} s ({r['load']})")
        out["commit"] = measure_commit(azurite.url("scale", "commits"), np)
        say(f"  commit of one shard: {out['commit']['ms']:.1f} ms median of "
            f"{out['commit']['shards']} ({out['commit']['load']})")
    finally:
        os.environ.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        azurite.stop()
    return out


def measure_commit(output: str, np, shards: int = 20) -> dict:
    """The sink's finalize step (dataio/sink.py) on ``shards`` one-part shards, each timed."""
    from dataio import indexed, sink
    from dataio.elements import PartInfo

    finalize = sink._FinalizeShardFn(output, "uint16", run_id="bench")
    times = []
    before = load()
    for k in range(shards):
        shard = f"web_{k:04d}_text_document"
        prefix = f"{sink.temporary_dir(output, 'bench')}/{shard}/part-00000"
        docs = [np.arange(200, dtype=np.uint16) for _ in range(50)]
        indexed.write_documents(prefix, docs, dtype=np.uint16)
        part = PartInfo(order=(0, 0), prefix=prefix, counts=indexed.Counts(50, 50, 10000))
        counts = (indexed.Counts(50, 50, 10000), 40000)  # and the input bytes
        element = (shard, {"planned": ["fp"], "parts": [part], "counts": [counts],
                           "failed": []})
        t = time.perf_counter()
        results = list(finalize.process(element))
        times.append(time.perf_counter() - t)
        assert results and results[0].failed is None
    return {"ms": statistics.median(times) * 1e3, "shards": shards, "load": before}


# --- the model -----------------------------------------------------------------------------------

# Beam caps a string-set metric at 1 MB; a shard's result is about 200 bytes of it, and the sink
# spreads the results over 256 string sets (dataio/sink.py RESULT_SETS) by a hash of the name.
RESULTS_CAP_SHARDS = 256 * 5000


def project(*, data_bytes: float, nodes: int, cores: int, file_bytes: float, compressed: bool,
            m: dict, startup_s: float, results_returned: bool) -> dict:
    slots = nodes * cores
    files = max(1, math.ceil(data_bytes / file_bytes))
    item = file_bytes if compressed else min(file_bytes, m["split_bytes"])
    items = files * max(1, math.ceil(file_bytes / item))
    rate = m["mb_per_core_s"] * MB * m["efficiency"]  # bytes per core-second in the job
    even = data_bytes / (slots * rate)
    compute = max(even, math.ceil(items / slots) * item / rate)
    read = data_bytes / min(nodes * m["node_gbps"], m["egress_gbps"]) / 1.25e8
    written = data_bytes * m["tokens_per_byte"] * 2 * 2  # uint16 parts + final shards
    write = written / min(nodes * m["node_gbps"], m["ingress_gbps"]) / 1.25e8
    shards = files
    planning = files * m["plan_s_per_file"]
    after = 0 if results_returned and shards <= RESULTS_CAP_SHARDS else m["requests_after"]
    driver_after = shards * (m["requests_before"] + after) * m["request_ms"] / 1e3
    commits = math.ceil(shards / slots) * m["commit_ms"] / 1e3  # in parallel on the workers
    data_phase = max(compute, read, write)
    wall = startup_s + planning + data_phase + commits + driver_after
    terms = {"tokenize compute": even, "input skew": compute - even,
             "storage bandwidth": data_phase - compute,
             "Blob: planning (listing, records)": planning, "Blob: shard commits": commits,
             "Blob: driver's per-shard requests": driver_after,
             "job start-up": startup_s}
    ranked = sorted(terms, key=terms.get, reverse=True)
    return {"wall": wall, "node_hours": nodes * wall / 3600, "files": files, "items": items,
            "bottleneck": ranked[0], "next": ranked[1], "terms": terms}


def fmt_s(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10000, help="generated inputs to plan and list")
    p.add_argument("--tokenize-mb", type=float, default=40, help="corpus for the per-core rate")
    p.add_argument("--no-measure", action="store_true", help="project from the defaults only")
    p.add_argument("--no-azurite", action="store_true")
    p.add_argument("--no-dry-run", action="store_true")
    p.add_argument("--workdir", default=None, help="kept when given (reused by a rerun)")
    p.add_argument("--compare-with", default=None, metavar="DIR",
                   help="also plan with the code in DIR (e.g. `git archive` of an earlier "
                        "commit), for before/after figures")
    # inputs of the projection (defaults: the measurements in docs/ and Azure's published limits)
    p.add_argument("--flink-startup-s", type=float, default=60,
                   help="docs/slurm-flink.md: ~30 s start-up/teardown + ~28 s "
                        "submission and SDK workers")
    p.add_argument("--spark-startup-s", type=float, default=51,
                   help="docs/spark.md, Figures: 51.0 s submit to exit through Livy, one "
                        "document, in a busy run (16 to 59 s with the load)")
    p.add_argument("--efficiency", type=float, default=0.69,
                   help="docs/benchmarks.md, Throughput: the job on 708 MB 67.59 / in memory 97.83 MB/s")
    p.add_argument("--mb-per-core-s", type=float, default=None,
                   help="tokenize MB per core-second (default: measured, fast backend; else "
                        "docs/scaling.md's measured 65.5)")
    p.add_argument("--tokens-per-byte", type=float, default=None)
    p.add_argument("--node-gbps", type=float, default=16,
                   help="network per node (a 64-core Azure VM gets 16-30 Gbit/s)")
    p.add_argument("--egress-gbps", type=float, default=120,
                   help="storage account egress limit (Azure standard GPv2: 120 Gbit/s in large "
                        "regions; ask for more)")
    p.add_argument("--ingress-gbps", type=float, default=60, help="storage account ingress")
    p.add_argument("--request-ms", type=float, default=None,
                   help="one Blob request (default: measured on Azurite; Azure in-region is "
                        "~5-20 ms)")
    p.add_argument("--commit-ms", type=float, default=None, help="commit of one shard")
    p.add_argument("--plan-ms-per-file", type=float, default=None,
                   help="driver planning per input file (default: measured)")
    p.add_argument("--requests-before", type=int, default=2,
                   help="serial driver requests per shard before the run (pipelines/tokenize/driver.py"
                        " prepare_output)")
    p.add_argument("--requests-after", type=int, default=3,
                   help="serial requests per shard after the run where the records are read "
                        "(dataio/manifest.py shard_result, count_bad_records)")
    p.add_argument("--file-gb", type=float, nargs="+", default=[1.0, 10.0],
                   help="input file sizes (GB of text) to project for")
    args = p.parse_args(argv)

    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-scale-")
    measured: dict = {}
    try:
        if not args.no_measure:
            say(f"cores here: {os.cpu_count()}; {load()}")
            paths, tok = make_corpus(os.path.join(work, "rate"), args.tokenize_mb)
            for backend in ("fast", "reference"):
                r = measure_tokenize(paths, tok, backend)
                measured[f"rate_{backend}"] = r
                say(f"tokenize {backend}: {r['mb_per_cpu_s']:.1f} MB per CPU-second "
                    f"({r['mb_per_wall_s']:.1f} MB/s wall, one CPU), {r['tokens_per_byte']:.3f} "
                    f"tokens/byte, {r['mb']:.0f} MB ({r['load']})")
            corpus = make_many_files(work, args.files)
            out = os.path.join(work, "out_plan")
            r = measure_plan(tokenize_argv(corpus, out, tok))
            measured["plan_local"] = r
            say(f"plan of {r['files']} local files (--verify-inputs): {r['plan']:.2f} s, "
                f"{r['items']} work items; setup {r['setup']:.1f} s ({r['load']})")
            r = measure_plan(tokenize_argv(corpus, out, tok, "--no-verify-inputs"))
            measured["plan_local_noverify"] = r
            say(f"plan of {r['files']} local files (--no-verify-inputs): {r['plan']:.2f} s "
                f"({r['load']})")
            if args.compare_with:
                for extra in ((), ("--no-verify-inputs",)):
                    r = measure_plan(tokenize_argv(corpus, out, tok, *extra),
                                     cwd=args.compare_with)
                    say(f"  before ({args.compare_with}) {' '.join(extra) or '--verify-inputs'}:"
                        f" {r['plan']:.2f} s ({r['load']})")
            fake_commits(corpus, out, tok)
            r = measure_plan(tokenize_argv(corpus, out, tok))
            measured["plan_local_rerun"] = r
            say(f"plan of a rerun, every shard committed: {r['plan']:.2f} s, {r['skipped']} "
                f"skipped ({r['load']})")
            if args.compare_with:
                r = measure_plan(tokenize_argv(corpus, out, tok), cwd=args.compare_with)
                say(f"  before ({args.compare_with}): {r['plan']:.2f} s, {r['skipped']} skipped "
                    f"({r['load']})")
            if not args.no_dry_run:
                r = measure_dry_run(tokenize_argv(corpus, os.path.join(work, "out_dry"), tok),
                                    timeout=600)  # a fresh output: every file estimated
                measured["dry_run"] = r
                say(f"--dry-run of {args.files} local files, whole command: "
                    f"{fmt_s(r['seconds']) if r['seconds'] else r['note']} ({r['load']})")
            if not args.no_azurite:
                try:
                    measured["azurite"] = measure_azurite(work, corpus, args.files, tok,
                                                          compare_with=args.compare_with)
                except FileNotFoundError as exc:
                    say(f"azurite: not measured ({exc})")
        m = model_inputs(args, measured)
        print_projection(args, m)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def model_inputs(args, measured: dict) -> dict:
    fast = measured.get("rate_fast", {})
    az = measured.get("azurite", {})
    plan = measured.get("plan_local", {})
    m = {
        "split_bytes": 256 << 20,
        "efficiency": args.efficiency,
        "mb_per_core_s": args.mb_per_core_s or fast.get("mb_per_cpu_s") or 65.5,
        "tokens_per_byte": args.tokens_per_byte or fast.get("tokens_per_byte") or 0.179,
        "node_gbps": args.node_gbps, "egress_gbps": args.egress_gbps,
        "ingress_gbps": args.ingress_gbps,
        # planning on Blob storage: the measured plan of --files blobs (listing included), per
        # file; else the local one
        "plan_s_per_file": args.plan_ms_per_file / 1e3 if args.plan_ms_per_file else
        (az["plan"]["plan"] / az["plan"]["files"]) if az.get("plan") else
        (plan["plan"] / plan["files"] if plan else 2e-4),
        "request_ms": args.request_ms or (az["request"]["ms"] if az.get("request") else 10.0),
        "commit_ms": args.commit_ms or (az["commit"]["ms"] if az.get("commit") else 100.0),
        "requests_before": args.requests_before, "requests_after": args.requests_after,
    }
    return m


LAYOUTS = ((1.0, False, "1 GB .jsonl files"), (10.0, True, "10 GB .jsonl.zst files"))


def print_projection(args, m: dict) -> None:
    say("\nmodel inputs: " + ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items()))
    say("\n| data | inputs | nodes x 64 cores | files / work items | wall, SLURM+Flink | "
        "wall, Spark | node-hours (Flink) | first bottleneck | then |")
    say("|---|---|---|---|---:|---:|---:|---|---|")
    for tb in (1, 10):
        for gb, compressed, label in LAYOUTS:
            for nodes in (10, 100):
                r = {runner: project(data_bytes=tb * 1e12, nodes=nodes, cores=64,
                                     file_bytes=gb * 1e9, compressed=compressed, m=m,
                                     startup_s=startup, results_returned=runner == "flink")
                     for runner, startup in (("flink", args.flink_startup_s),
                                             ("spark", args.spark_startup_s))}
                f = r["flink"]
                say(f"| {tb} TB | {label} | {nodes} | {f['files']:,} / {f['items']:,} | "
                    f"{fmt_s(f['wall'])} | {fmt_s(r['spark']['wall'])} | "
                    f"{f['node_hours']:.1f} | {f['bottleneck']} "
                    f"({fmt_s(f['terms'][f['bottleneck']])}) | {f['next']} "
                    f"({fmt_s(f['terms'][f['next']])}) |")
    say("\none 50 GB input among 1 TB of 1 GB files, 10 nodes (what its largest item costs):")
    rate = m["mb_per_core_s"] * MB * m["efficiency"]
    for compressed, label in ((False, ".jsonl: 200 ranges of 256 MiB"),
                              (True, ".jsonl.zst: one work item")):
        item = 50e9 if compressed else m["split_bytes"]
        say(f"  {label}: its longest item {fmt_s(item / rate)} on one core")


if __name__ == "__main__":
    sys.exit(main())
