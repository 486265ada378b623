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
# tokenbeam needs Python 3.11+: the script uses python3.12/python3.11 when the node has one,
# else creates a conda environment with the cluster's Anaconda (/usr/bin/anaconda).
set -euo pipefail

PACKAGE=${1:?usage: hdinsight-script-action.sh PACKAGE [ENV_PATH]}
ENV_PATH=${2:-/usr/local/tokenbeam/venv}
CONDA=${TOKENBEAM_CONDA:-/usr/bin/anaconda/bin/conda}

log() { echo "tokenbeam script action: $*"; }

if [ ! -x "$ENV_PATH/bin/python" ]; then
  python=""
  for candidate in python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1; then python=$(command -v "$candidate"); break; fi
  done
  if [ -n "$python" ]; then
    log "creating a venv at $ENV_PATH with $python"
    "$python" -m venv "$ENV_PATH"
  elif [ -x "$CONDA" ]; then
    log "creating a conda environment (Python 3.11) at $ENV_PATH"
    "$CONDA" create --yes --quiet --prefix "$ENV_PATH" python=3.11 pip
  else
    log "no Python 3.11+ and no conda at $CONDA; install one, or set TOKENBEAM_CONDA" >&2
    exit 1
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
