#!/usr/bin/env bash
# What a Flink submission (python -m runners.slurm / runners.flink submit) needs on the
# submitting machine, and nothing else (no SLURM, munge: the cluster has them), idempotent:
#   - a Flink distribution from the apache-flink + apache-flink-libraries wheels, installed
#     --no-deps into its own venv under $CACHE/flink/<version> (their Python pins clash with
#     Beam 2.77); $CACHE/flink/home links to it. SLURM jobs start it on the allocated nodes,
#     so $CACHE must be on storage the nodes share (or set flink_home in the config).
#   - Beam's Flink job-server jar into $CACHE/jars (linked as $CACHE/jars/flink-job-server.jar),
#     so Beam never downloads anything at run time: the prebuilt jar from Maven Central when
#     Central serves it, else one built here with Maven from the runner artifact
#     (runners/templates/job-server-pom.xml)
#   - Java 17 and Maven (java-maven.sh)
# Why Flink 1.19 and not 2.2: the Maven Central this project reaches serves neither Beam's
# Flink job-server jars nor any beam-runners-flink-2.x artifact; the newest Flink runner it has
# is beam-runners-flink-1.19:2.70.0 (its job service at 2.65.0), which runs Python 2.77 SDK
# pipelines (tested end to end by tests/e2e/runners/). Point runners/*.yaml at a Flink 2.2 and
# beam-runners-flink-2.2-job-server-2.77.0.jar where you have them.
# --check: exit 0 when all is there, 1 otherwise (prints nothing). Needs ROOT and CACHE.
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"

FLINK_VERSION=1.19.3
FLINK_MINOR=${FLINK_VERSION%.*}
PREBUILT_BEAM=2.77.0    # the prebuilt job server matching the SDK, tried first
BUILD_BEAM=2.70.0       # fallback: the newest Flink runner on the reachable Maven Central
BUILD_JOBSERVICE=2.65.0 # and its job service
here=$(dirname "$0")
dest=$CACHE/jars
prebuilt=beam-runners-flink-$FLINK_MINOR-job-server-$PREBUILT_BEAM.jar
built=beam-runners-flink-$FLINK_MINOR-job-server-$BUILD_BEAM.jar

installed() {
  [ -f "$CACHE/flink/$FLINK_VERSION/.installed" ] && [ -e "$CACHE/flink/home" ] \
    && [ -s "$dest/flink-job-server.jar" ] && command -v java >/dev/null 2>&1 \
    && { [ -s "$dest/$prebuilt" ] || [ -s "$dest/$built" ]; }
}

flink_dist() {
  local venv=$CACHE/flink/$FLINK_VERSION/venv
  local stamp=$CACHE/flink/$FLINK_VERSION/.installed
  if [ -f "$stamp" ]; then
    ln -sfn "$(cat "$stamp")" "$CACHE/flink/home"
    return 0
  fi
  echo "flink: Flink $FLINK_VERSION (the apache-flink wheels, ~300 MB, ~1 min) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --no-deps \
    "apache-flink==$FLINK_VERSION" "apache-flink-libraries==$FLINK_VERSION"
  local home
  home=$("$venv/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')
  # Wheels do not keep the executable bit on the launcher scripts.
  chmod +x "$home"/bin/*
  [ -f "$home/lib/flink-dist-$FLINK_VERSION.jar" ] || { echo "no flink-dist jar in $home/lib" >&2; exit 1; }
  ln -sfn "$home" "$CACHE/flink/home"
  printf '%s\n' "$home" >"$stamp"
}

job_server_jar() {
  local link=$dest/flink-job-server.jar
  mkdir -p "$dest"
  if [ -s "$dest/$prebuilt" ]; then ln -sfn "$prebuilt" "$link"; return 0; fi
  if [ -s "$dest/$built" ]; then ln -sfn "$built" "$link"; return 0; fi
  echo "flink: Beam's Flink job-server jar into $dest (~1-2 min with Maven)"
  if mvn -q -B -Dstyle.color=never dependency:copy \
      -Dartifact="org.apache.beam:beam-runners-flink-$FLINK_MINOR-job-server:$PREBUILT_BEAM" \
      -DoutputDirectory="$dest" >"$dest/mvn-prebuilt.log" 2>&1 && [ -s "$dest/$prebuilt" ]; then
    ln -sfn "$prebuilt" "$link"
    return 0
  fi
  echo "flink: no prebuilt $prebuilt on Maven Central; building $built"
  local build=$dest/build
  rm -rf "$build" && mkdir -p "$build"
  cp "$ROOT/runners/templates/job-server-pom.xml" "$build/pom.xml"
  local log=$dest/flink-build.log   # Maven's output, shown only when the build fails
  if ! (cd "$build" && mvn -q -B -Dstyle.color=never package -Dbeam.version="$BUILD_BEAM" \
      -Dflink.minor="$FLINK_MINOR" -Djobservice.version="$BUILD_JOBSERVICE" -Dout.dir="$dest" \
      -Dout.name="${built%.jar}") >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "flink: building $built failed (Maven's output above; all of it in $log)" >&2
    exit 1
  fi
  rm -rf "$build"
  [ -s "$dest/$built" ] || { echo "building $built failed" >&2; exit 1; }
  ln -sfn "$built" "$link"
}

if [ "${1:-}" = --check ]; then installed; exit; fi
bash "$here/java-maven.sh"
flink_dist
job_server_jar
