#!/usr/bin/env bash
# A real YARN cluster for the Spark-on-YARN test (tests/e2e/runners/test_spark_yarn_cluster.py), idempotent:
#   - Hadoop's MiniYARNCluster: org.apache.hadoop:hadoop-minicluster and its dependencies from
#     Maven Central (tests/e2e/runners/yarn-minicluster-pom.xml) into $CACHE/yarn/lib
#   - tests/e2e/runners/YarnMiniCluster.java (starts it, writes yarn-site.xml) compiled into
#     $CACHE/yarn/classes
# Spark itself (spark-submit, spark-yarn) is 40-spark-livy.sh's pyspark wheel; Java 17 and Maven
# come from 30-flink-slurm.sh. Needs ROOT and CACHE (scripts/setup.sh passes them).
set -euo pipefail
: "${ROOT:?}" "${CACHE:?}"

HADOOP_VERSION=3.3.6    # closest to the Hadoop 3.3.4 client in the pyspark 3.5.8 wheel
home=$CACHE/yarn
src=$ROOT/tests/e2e/runners/YarnMiniCluster.java

minicluster_jars() {
  local lib=$home/lib stamp=$home/.installed
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$HADOOP_VERSION" ] && return 0
  echo "45-yarn: hadoop-minicluster $HADOOP_VERSION jars into $lib (~30 s)"
  local build=$home/build
  rm -rf "$build" "$lib.part" "$stamp" && mkdir -p "$build"
  cp "$ROOT/tests/e2e/runners/yarn-minicluster-pom.xml" "$build/pom.xml"
  (cd "$build" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
      -Dhadoop.version="$HADOOP_VERSION" -DincludeScope=runtime -DoutputDirectory="$lib.part") \
    || { echo "45-yarn: fetching hadoop-minicluster's jars failed (see the Maven output above)" >&2; exit 1; }
  rm -rf "$build" "$lib" && mv "$lib.part" "$lib"
  [ -s "$lib/hadoop-yarn-server-tests-$HADOOP_VERSION-tests.jar" ] \
    || { echo "45-yarn: no MiniYARNCluster (hadoop-yarn-server-tests) in $lib" >&2; exit 1; }
  echo "$HADOOP_VERSION" > "$stamp"
}

launcher_class() {
  local classes=$home/classes
  [ -f "$classes/YarnMiniCluster.class" ] && [ "$classes/YarnMiniCluster.class" -nt "$src" ] \
    && [ "$classes/YarnMiniCluster.class" -nt "$home/.installed" ] && return 0
  echo "45-yarn: compiling $src"
  rm -rf "$classes.part" && mkdir -p "$classes.part"
  javac -nowarn -d "$classes.part" -cp "$home/lib/*" "$src" \
    || { echo "45-yarn: compiling YarnMiniCluster.java failed" >&2; exit 1; }
  rm -rf "$classes" && mv "$classes.part" "$classes"
}

minicluster_jars
launcher_class
