#!/usr/bin/env bash
# Idempotent set-up of everything tokenbeam's demo and tests need on a fresh machine:
#   scripts/setup.sh           the Python environment (.venv) with tokenbeam installed
#   scripts/setup.sh --spark   also what a Spark submission needs (runners.spark): Beam's Spark
#                              runtime jar; no local Spark, Livy or YARN (scripts/runtime.d/spark.sh)
#   scripts/setup.sh --flink   also what a Flink submission needs (runners.slurm, runners.flink):
#                              a Flink distribution and Beam's Flink job-server jar (runtime.d/flink.sh)
#   scripts/setup.sh --test    also the real services the tests start (scripts/setup.d/*.sh)
# Everything lands in .venv/ and .cache/ inside the checkout (except what apt installs when
# missing: Java 17 and Maven for --spark/--flink, the test services' packages for --test; and
# Maven's downloads, in ~/.m2); re-running skips what is there.
# Each step says what it installs and about how long it takes, then how long it took; a long
# step prints a line every SETUP_HEARTBEAT_S seconds (default 15) with what it is doing.
set -euo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/.cache
HEARTBEAT=${SETUP_HEARTBEAT_S:-15}
mkdir -p "$CACHE"

say() { printf 'setup: %s\n' "$*"; }

# run_with_heartbeat WHAT LOG CMD...: run CMD, its output into LOG ("-": left on the terminal);
# every $HEARTBEAT s a line saying WHAT is still running, with LOG's latest pip step.
run_with_heartbeat() {
  local what=$1 log=$2 start=$SECONDS next=$HEARTBEAT pid status=0 last
  shift 2
  if [ "$log" = - ]; then "$@" & else "$@" >"$log" 2>&1 & fi
  pid=$!
  # a background job ignores Ctrl-C in a script: take it down with us
  trap 'kill "$pid" 2>/dev/null || true' INT TERM EXIT
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge "$next" ]; then
      last=""
      if [ "$log" != - ]; then
        last=$(grep -E '^(Collecting|Downloading|Building|Installing|Successfully)' "$log" \
               | tail -n 1 | cut -c 1-90 || true)
      fi
      say "  ... $what: $((SECONDS - start)) s${last:+ ($last)}"
      next=$((next + HEARTBEAT))
    fi
  done
  wait "$pid" || status=$?
  trap - INT TERM EXIT
  return "$status"
}

# installed STAMP DIGEST: tokenbeam is installed in .venv for this setup.py (STAMP holds its
# sha256; an empty STAMP, from before the digest was kept, counts while newer than setup.py)
installed() {
  local stamp=$1 digest=$2
  { [ -x .venv/bin/python ] && [ -f "$stamp" ]; } || return 1
  [ "$(cat "$stamp")" = "$digest" ] && return 0
  [ ! -s "$stamp" ] && [ ! setup.py -nt "$stamp" ]
}

python_env() {
  local stamp=.venv/.tokenbeam-installed
  local digest
  digest=$(sha256sum setup.py | cut -d ' ' -f 1)
  if installed "$stamp" "$digest"; then
    [ -n "${1:-}" ] && return 0   # said together with the runtime's state (see runtime)
    say ".venv is up to date: tokenbeam and its dependencies are installed (nothing to do)"
    return 0
  fi
  local t0=$SECONDS
  if [ ! -x .venv/bin/python ]; then
    say "creating the Python environment .venv (python3 -m venv, ~5 s)"
    python3 -m venv .venv
  fi
  # pip's build backend warns on every editable install: its output goes to the log, shown only
  # on failure; the heartbeat names the package pip is at
  local log=.venv/.tokenbeam-install.log
  say "installing tokenbeam into .venv with pip: Apache Beam, transformers, tokenizers," \
      "sentencepiece, pyarrow, adlfs, the test and benchmark tools (~900 MB; 1-3 min on a" \
      "fast network, the first time only); pip's log: $log"
  local extras=".[azure,fast,sentences,test,bench,plot]"
  # shellcheck disable=SC2016 # $1 is the inner shell's: the extras, passed as an argument
  if ! run_with_heartbeat "pip install" "$log" sh -c \
       '.venv/bin/pip install --progress-bar off --upgrade pip &&
        .venv/bin/pip install --progress-bar off -e "$1"' sh "$extras"; then
    cat "$log" >&2
    echo "setup: installing tokenbeam into .venv failed (the output above is in $log)" >&2
    exit 1
  fi
  printf '%s\n' "$digest" >"$stamp"
  say "installed tokenbeam into .venv in $((SECONDS - t0)) s"
}

# runtime spark|flink WHAT MINUTES: what a user's Spark or Flink submission needs
# (scripts/runtime.d/NAME.sh); one line when it and .venv are there already.
runtime() {
  local name=$1 what=$2 minutes=$3 part=scripts/runtime.d/$1.sh t0=$SECONDS
  if env ROOT="$ROOT" CACHE="$CACHE" bash "$part" --check; then
    say "up to date: .venv and the $name runtime ($what) are installed (nothing to do)"
    return 0
  fi
  say "the $name runtime: $what (Java 17 and Maven from apt when missing; the first time" \
      "about $minutes min, then seconds)"
  run_with_heartbeat "$name runtime" - env ROOT="$ROOT" CACHE="$CACHE" bash "$part"
  say "the $name runtime is ready in .cache/ ($((SECONDS - t0)) s)"
}

usage() {  # the options, from this file's header
  sed -n '2,/^set -euo/p' "$SELF" | sed -e '$d' -e 's/^# \{0,1\}//'
}
if [ "$#" -gt 1 ]; then
  echo "setup: one option at a time (got: $*): run it once per option, e.g." \
       "bash scripts/setup.sh --spark, then bash scripts/setup.sh --flink" >&2
  exit 2
fi
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  "" | --test) python_env ;;
  --spark)
    python_env quiet
    runtime spark "Beam's Spark 3 job-server jar, staged beside each job" 2
    exit 0 ;;
  --flink)
    python_env quiet
    runtime flink "a Flink 1.19 distribution and Beam's Flink job-server jar" 3
    exit 0 ;;
  *) echo "setup: unknown option $1: give none (the Python environment), --spark, --flink or" \
          "--test (--help says what each installs)" >&2
     exit 2 ;;
esac
[ "${1:-}" = "--test" ] || exit 0

# --- services for the integration tests (each block owns its own cache folder) -------------
# Each part is silent when its service is installed already, and says what it fetches when not.
t0=$SECONDS
parts=""
for part in scripts/setup.d/*.sh; do
  if [ -e "$part" ]; then parts="$parts${parts:+ }$(basename "$part" .sh)"; fi
done
say "test services (scripts/setup.d: ${parts:-none}): Azurite (npm), SLURM, munge, Java, Maven" \
    "(apt), Flink, Spark, Livy, YARN (wheels and Maven jars into .cache/); the first time" \
    "several minutes, then seconds"
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  run_with_heartbeat "$(basename "$part" .sh)" - env ROOT="$ROOT" CACHE="$CACHE" bash "$part"
done
say "test services ready ($((SECONDS - t0)) s)"
