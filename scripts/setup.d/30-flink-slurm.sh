#!/usr/bin/env bash
# Services for the Flink/SLURM runner tests (runners/, tests/e2e/runners/), idempotent:
#   - Debian slurm-wlm + munge (the tests start their own munged/slurmctld/slurmd under a tmp dir;
#     the packages' post-install scripts start no daemons here), Java 17, Maven, iproute2
#   - what a user's Flink submission needs, scripts/runtime.d/flink.sh (`setup.sh --flink`):
#     the Flink distribution and Beam's Flink job-server jar under $CACHE
# Needs ROOT and CACHE (scripts/setup.sh passes them).
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"

apt_packages() {
  local missing=()
  command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
  command -v munged >/dev/null 2>&1 || missing+=(munge)
  command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  command -v ss >/dev/null 2>&1 || missing+=(iproute2)   # ss: the runner tests list listening sockets
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "30-flink-slurm: apt-get install ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

apt_packages
bash "$ROOT/scripts/runtime.d/flink.sh"
