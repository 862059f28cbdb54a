#!/usr/bin/env bash
# Build (once) the Beam Flink jars for the Beam version pinned in requirements.txt, in build/flink/:
#   beam-flink-<flink>-job-server-<beam>.jar   runnable job server: --flink_job_server_jar=JAR
#   beam-flink-<flink>-runner-lib-<beam>.jar   the same Beam classes without Flink's, for a cluster's lib/
# Prints the job server jar's path on stdout. Does nothing but print it when both jars exist.
# Needs java and mvn; the first build downloads about 250 MB from Maven Central into ~/.m2.
# Environment: FLINK_VERSION (default 1.19, the Flink line of the Beam runner), OUT_DIR (default build/flink).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
flink="${FLINK_VERSION:-1.19}"
out="${OUT_DIR:-$root/build/flink}"
beam="$(sed -n 's/^apache-beam\(\[[^]]*\]\)\?==\([0-9.]*\).*/\2/p' "$root/requirements.txt" | head -n 1)"
if [ -z "$beam" ]; then
  echo "fetch_job_server.sh: no apache-beam==X pin in $root/requirements.txt" >&2
  exit 1
fi
name="beam-flink-$flink-job-server-$beam"
lib="beam-flink-$flink-runner-lib-$beam"
if [ -s "$out/$name.jar" ] && [ -s "$out/$lib.jar" ]; then
  echo "$out/$name.jar"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "fetch_job_server.sh: $tool is not on PATH" >&2; exit 1; }
done
mkdir -p "$out"
work="$out/maven"
rm -rf "$work"
# Build under temporary names, then rename: an interrupted build never leaves a jar that looks complete.
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" package \
  -Dbeam.version="$beam" -Dflink.version="$flink" -Dwork.dir="$work" -Djar.dir="$work" \
  -Djar.name="$name.partial" -Dlib.jar.name="$lib.partial" >&2
mv "$work/$lib.partial.jar" "$out/$lib.jar"
mv "$work/$name.partial.jar" "$out/$name.jar"
rm -rf "$work"
echo "$out/$name.jar"
