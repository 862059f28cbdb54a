#!/usr/bin/env bash
# Build (once) the runnable Beam Flink job server jar for the Beam version pinned in requirements.txt:
#   build/flink/beam-flink-<flink>-job-server-<beam>.jar
# Prints the jar's path on stdout. Does nothing but print it when the jar already exists.
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
jar="$out/$name.jar"
if [ -s "$jar" ]; then
  echo "$jar"
  exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "fetch_job_server.sh: $tool is not on PATH" >&2; exit 1; }
done
mkdir -p "$out"
work="$out/maven"
# Build under a temporary name, then rename: an interrupted build never leaves a jar that looks complete.
mvn -q -B -f "$here/pom.xml" package \
  -Dbeam.version="$beam" -Dflink.version="$flink" \
  -Dstyle.color=never -Dwork.dir="$work" -Djar.dir="$work" -Djar.name="$name.partial" >&2
mv "$work/$name.partial.jar" "$jar"
rm -rf "$work"
echo "$jar"
