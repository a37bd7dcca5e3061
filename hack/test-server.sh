#!/usr/bin/env bash
# Fetch, once, Temporal's time-skipping test server (the Java one, io.temporal:temporal-test-server
# from Maven Central with its dependencies) for the workflow's timer tests
# (tests/integration/test_workflow_timers.py). The SDK would download a native build from
# temporal.download, which this machine cannot reach; the Java build is the same server.
# Output: $DMROLLOUT_CACHE/temporal-test-server-<version>/temporal-test-server, an executable
# that takes the port as the native one does.
#
#   hack/test-server.sh            fetch what is missing, print the executable's path
#   hack/test-server.sh --print    print the path without fetching
set -euo pipefail

version=1.31.0
cache="${DMROLLOUT_CACHE:-$HOME/.cache/dmrollout}"
dir="$cache/temporal-test-server-$version"
exe="$dir/temporal-test-server"

if [[ "${1:-}" == "--print" || -x "$exe" ]]; then
  echo "$exe"
  exit 0
fi
for tool in mvn java; do
  command -v "$tool" >/dev/null || { echo "test-server.sh: $tool is required" >&2; exit 1; }
done
mkdir -p "$dir"
exec 9>"$cache/.test-server.lock"
flock 9
if [[ -x "$exe" ]]; then
  echo "$exe"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat > "$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>dmrollout.local</groupId><artifactId>test-server</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>io.temporal</groupId><artifactId>temporal-test-server</artifactId>
    <version>$version</version>
  </dependency></dependencies>
</project>
POM
mvn -q -B -f "$work/pom.xml" dependency:copy-dependencies -DoutputDirectory="$dir/lib" >&2
cat > "$exe.tmp" <<SH
#!/bin/sh
# Temporal's test server with time skipping; the first argument is the port.
exec java -Xss512k -cp "$dir/lib/*" io.temporal.testserver.TestServer "\$@"
SH
chmod +x "$exe.tmp"
mv "$exe.tmp" "$exe"
echo "$exe"
