#!/usr/bin/env bash
# A JDK and Maven from Debian's packages, for the Flink tests (tests/integration/test_flink.py builds Beam's Flink
# job-server jar with Maven and runs Flink's JobManager and TaskManager on the JDK).
# Called by `make test`. Installs with apt-get when java or mvn is missing and this runs as root (as CI
# does); otherwise says what to run. Under CI=true a skipped Flink test fails (tests/conftest.py).
set -euo pipefail
missing=()
command -v java >/dev/null 2>&1 || missing+=(default-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "tools/install_java_maven.sh: ${missing[*]} missing; run 'sudo apt-get install -y ${missing[*]}'" \
         "(the Flink tests skip without them, and fail under CI=true)" >&2
    exit 0
fi
echo "tools/install_java_maven.sh: installing ${missing[*]} for the Flink tests" >&2
export DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes    # no "delaying package configuration" notice
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
java -version
mvn --version | head -1
