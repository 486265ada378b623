#!/usr/bin/env bash
# HDInsight script action: install tokenbeam in its own Python environment on every node, so
# that Spark executors can start Beam's Python SDK workers with `tokenbeam-sdk-boot`.
#
# Run it on the head and worker nodes (Azure portal: cluster > Script actions > Submit new,
# node types "Head" and "Worker", "Persist" ticked so new workers get it too), or with
#   az hdinsight script-action execute --cluster-name C --resource-group G \
#     --name tokenbeam --roles headnode workernode --persist-on-success \
#     --script-uri https://ACCOUNT.blob.core.windows.net/scripts/hdinsight-script-action.sh \
#     --script-parameters "PACKAGE [ENV_PATH]"
#
# Parameters:
#   PACKAGE   what pip installs: the tokenbeam wheel you built (`pip wheel --no-deps .`) and
#             uploaded where the nodes can read it, with its extras, e.g.
#             "tokenbeam[azure,fast,sentences] @ https://ACCOUNT.blob.core.windows.net/wheels/tokenbeam-0.1.0-py3-none-any.whl"
#             Install the same tokenbeam and apache-beam versions as the machine you submit
#             from: the pipeline jar is written by that machine's Beam.
#   ENV_PATH  where the environment goes (default /usr/local/tokenbeam/venv); put the same
#             path in runners/spark_hdinsight.yaml as python_env.
# Environment (all optional):
#   TOKENBEAM_PYTHON_VERSION  the Python 3.N of the machine you submit from (default 3.11, the
#                          README's): the nodes must run the same 3.N, since the pipeline's code
#                          is pickled there (cloudpickle) and unpickled here, and bytecode is
#                          not portable between Python versions; 3.11 or later
#   TOKENBEAM_PYTHON       the interpreter to create the venv with (checked: that version, with
#                          venv); without it python3.N, else python3 when it is 3.N, from PATH,
#                          with venv and ensurepip
#   TOKENBEAM_CONDA        conda used when no such Python is found (default: the cluster's
#                          Anaconda, /usr/bin/anaconda/bin/conda): a conda env with Python 3.N
#   TOKENBEAM_PIP_OPTIONS  extra pip options (an index URL, --no-index --find-links ...)
# Without any of them the script fails with one line saying what it tried.
set -euo pipefail

PACKAGE=${1:?usage: hdinsight-script-action.sh PACKAGE [ENV_PATH]}
ENV_PATH=${2:-/usr/local/tokenbeam/venv}
CONDA=${TOKENBEAM_CONDA:-/usr/bin/anaconda/bin/conda}

log() { echo "tokenbeam script action: $*"; }

fail() { log "$*" >&2; exit 1; }
WANT=${TOKENBEAM_PYTHON_VERSION:-3.11}   # the submitting machine's Python 3.N
case "$WANT" in
  3.1[1-9] | 3.[2-9][0-9]) ;;
  *) fail "TOKENBEAM_PYTHON_VERSION=$WANT: give the submitting machine's Python as 3.N" \
          "(3.11 or later), e.g. 3.11" ;;
esac

# version_of PYTHON: its "3.N" (empty when it does not run)
version_of() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true
}

# usable PYTHON: Python $WANT and able to create a venv with pip (Debian's python3 lacks
# ensurepip until python3-venv is installed)
usable() {
  [ "$(version_of "$1")" = "$WANT" ] && "$1" -c 'import venv, ensurepip' >/dev/null 2>&1
}

# pick_python: sets $python to the interpreter to use, or leaves it empty and $tried saying
# what PATH had
pick_python() {
  local candidate path
  python="" tried=""
  if [ -n "${TOKENBEAM_PYTHON:-}" ]; then
    path=$(command -v "$TOKENBEAM_PYTHON" || true)
    [ -n "$path" ] || fail "TOKENBEAM_PYTHON=$TOKENBEAM_PYTHON: no such interpreter"
    usable "$path" || fail "TOKENBEAM_PYTHON=$TOKENBEAM_PYTHON is Python" \
      "$(version_of "$path" | grep . || echo "of no known version")," \
      "not $WANT with venv: point it at a Python $WANT (with its venv module), the" \
      "submitting machine's (or set TOKENBEAM_PYTHON_VERSION to that machine's 3.N)"
    python=$path
    return 0
  fi
  for candidate in "python$WANT" python3; do
    path=$(command -v "$candidate" || true)
    [ -n "$path" ] || continue
    if usable "$path"; then python=$path; return 0; fi
    tried="$tried${tried:+, }$path ($(version_of "$path" | grep . || echo "?"))"
  done
}

if [ -x "$ENV_PATH/bin/python" ]; then
  version=$(version_of "$ENV_PATH/bin/python")
  if [ "$version" != "$WANT" ]; then
    fail "$ENV_PATH holds Python ${version:-of no known version}; the nodes need $WANT, the" \
      "submitting machine's: remove $ENV_PATH (or give another ENV_PATH) and run this again"
  fi
else
  pick_python
  if [ -n "$python" ]; then
    log "creating a venv at $ENV_PATH with $python (Python $(version_of "$python"))"
    "$python" -m venv "$ENV_PATH"
  elif [ -x "$CONDA" ]; then
    log "no Python $WANT on PATH (${tried:-none}); creating a conda environment" \
      "(Python $WANT) at $ENV_PATH with $CONDA"
    "$CONDA" create --yes --quiet --prefix "$ENV_PATH" "python=$WANT" pip
  else
    fail "no Python $WANT with venv on PATH (${tried:-no python3 at all}) and no conda" \
      "at $CONDA: set TOKENBEAM_PYTHON to a Python $WANT, or TOKENBEAM_CONDA to a conda"
  fi
fi

log "installing $PACKAGE into $ENV_PATH"
"$ENV_PATH/bin/python" -m pip install --quiet --upgrade pip
# shellcheck disable=SC2086  # TOKENBEAM_PIP_OPTIONS holds several options on purpose
"$ENV_PATH/bin/python" -m pip install --quiet ${TOKENBEAM_PIP_OPTIONS:-} "$PACKAGE"

# The boot command the executors start, and the packages it needs, must be there.
test -x "$ENV_PATH/bin/tokenbeam-sdk-boot" || {
  log "$ENV_PATH/bin/tokenbeam-sdk-boot is missing after the install: is PACKAGE tokenbeam?" >&2
  exit 1
}
"$ENV_PATH/bin/python" -c "import apache_beam, pipelines.tokenize, runners.sdk_boot" || {
  log "tokenbeam does not import in $ENV_PATH (see the error above)" >&2
  exit 1
}
log "ready: python_env: $ENV_PATH ($("$ENV_PATH/bin/python" -c 'import apache_beam; print("apache-beam", apache_beam.__version__)'))"
