#!/usr/bin/env bash
# Services for the Spark runner tests (runners/spark.py, tests/e2e/runners/test_spark_*.py), idempotent:
#   - Spark 3.5.8 from the pyspark wheel in its own venv ($CACHE/spark/venv); its package folder
#     is SPARK_HOME, linked as $CACHE/spark/home
#   - what a user's Spark submission needs, scripts/runtime.d/spark.sh (`setup.sh --spark`):
#     Beam's Spark 3 job-server jar (the runtime runners/spark.py stages beside each job)
#   - Apache Livy 0.7.1-incubating's server jars ($CACHE/livy/lib), from Maven Central
#     (runners/templates/livy-pom.xml): the REST API HDInsight exposes
# Java 17 and Maven come from 30-flink-slurm.sh. Needs ROOT and CACHE (scripts/setup.sh passes them).
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"

SPARK_VERSION=3.5.8
LIVY_VERSION=0.7.1-incubating

spark_dist() {
  local venv=$CACHE/spark/venv stamp=$CACHE/spark/.installed-$SPARK_VERSION
  if [ ! -f "$stamp" ]; then
    echo "40-spark-livy: Spark $SPARK_VERSION (pyspark wheel) into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "pyspark==$SPARK_VERSION"
    touch "$stamp"
  fi
  local home
  home=$("$venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  chmod +x "$home"/bin/* "$home"/sbin/*.sh   # wheels drop the executable bit
  [ -x "$home/bin/spark-submit" ] || { echo "40-spark-livy: no bin/spark-submit in $home" >&2; exit 1; }
  ln -sfn "$home" "$CACHE/spark/home"
}

livy_jars() {
  local lib=$CACHE/livy/lib
  [ -s "$lib/livy-server-$LIVY_VERSION.jar" ] && return 0
  echo "40-spark-livy: Livy $LIVY_VERSION jars into $lib"
  local build=$CACHE/livy/build
  rm -rf "$build" "$lib.part" && mkdir -p "$build"
  cp "$ROOT/runners/templates/livy-pom.xml" "$build/pom.xml"
  (cd "$build" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
      -Dlivy.version="$LIVY_VERSION" -DincludeScope=runtime -DoutputDirectory="$lib.part") \
    || { echo "40-spark-livy: fetching Livy's jars failed (see the Maven output above)" >&2; exit 1; }
  rm -rf "$build" "$lib" && mv "$lib.part" "$lib"
  [ -s "$lib/livy-server-$LIVY_VERSION.jar" ] || { echo "40-spark-livy: no livy-server jar in $lib" >&2; exit 1; }
}

spark_dist
bash "$ROOT/scripts/runtime.d/spark.sh"
livy_jars
