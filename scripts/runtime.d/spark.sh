#!/usr/bin/env bash
# What a Spark submission (python -m runners.spark submit) needs on the submitting machine, and
# nothing else (no local Spark, Livy or YARN: the cluster has them), idempotent:
#   - Beam's Spark 3 job-server jar, the runtime the launcher stages beside each job, built with
#     Maven (runners/templates/spark-job-server-pom.xml; the reachable Maven Central does not
#     serve it prebuilt), linked as $CACHE/jars/spark-job-server.jar
#   - Java 17 and Maven to build it (java-maven.sh)
# --check: exit 0 when all is there, 1 otherwise (prints nothing). Needs ROOT and CACHE.
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"
BEAM_RUNNER=2.70.0      # newest beam-runners-spark-3 on the reachable Maven Central
JOB_SERVICE=2.65.0      # newest beam-runners-java-job-service there
dest=$CACHE/jars
name=beam-runners-spark-3-job-server-$BEAM_RUNNER.jar
here=$(dirname "$0")

if [ "${1:-}" = --check ]; then
  [ -s "$dest/$name" ] && [ "$(readlink "$dest/spark-job-server.jar" || true)" = "$name" ]
  exit
fi
mkdir -p "$dest"
if [ ! -s "$dest/$name" ]; then
  bash "$here/java-maven.sh"
  echo "spark: building $name with Maven (~1-2 min; ~100 MB from Maven Central the first time)"
  build=$CACHE/jars/spark-build
  rm -rf "$build" && mkdir -p "$build"
  cp "$ROOT/runners/templates/spark-job-server-pom.xml" "$build/pom.xml"
  # Maven's own output (and the terminal codes it prints even in batch mode) goes to a log,
  # shown only when the build fails
  log=$dest/spark-build.log
  if ! (cd "$build" && mvn -q -B -Dstyle.color=never package -Dbeam.version="$BEAM_RUNNER" \
      -Djobservice.version="$JOB_SERVICE" -Dout.dir="$dest" -Dout.name="${name%.jar}") \
      >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "spark: building $name failed (Maven's output above; all of it in $log)" >&2
    exit 1
  fi
  rm -rf "$build"
fi
[ -s "$dest/$name" ] || { echo "spark: $dest/$name is missing" >&2; exit 1; }
ln -sfn "$name" "$dest/spark-job-server.jar"
