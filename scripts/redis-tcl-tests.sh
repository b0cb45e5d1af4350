#!/usr/bin/env bash
# Runs units of Redis's own test suite (tests/unit/*.tcl of a Redis source tree) against our
# server in the suite's external-server mode, and prints how many tests passed and failed.
#
# usage: REDIS_SRC=/path/to/redis-7.4.1 scripts/redis-tcl-tests.sh [UNIT ...]   (default: scripting)
# Needs tclsh and a built Redis tree (its redis-cli and redis-benchmark). Run from the project's
# root after `cargo build --release` (KVSERVER=path picks another binary). The suite is copied to
# a temporary directory first; EVAL_ONLY=1 makes scripting.tcl run its EVAL pass only (it runs
# each test once through EVAL and once through FUNCTION LOAD/FCALL).
# A unit that leaves a script running forever (the SCRIPT KILL tests) may stop the run there:
# SCRIPT KILL reaches a script only from a connection on another shard than the script's.
set -u
REDIS_SRC=${REDIS_SRC:?set REDIS_SRC to a built Redis source tree}
UNITS=("$@"); [ ${#UNITS[@]} -eq 0 ] && UNITS=(scripting)
PORT=${PORT:-7797}
work=$(mktemp -d)
trap 'kill -9 $server 2>/dev/null; [ -n "${KEEP:-}" ] && cp "$work/run.log" "$KEEP"; rm -rf "$work"' EXIT
cp -r "$REDIS_SRC/tests" "$REDIS_SRC/runtest" "$work/"
mkdir -p "$work/src"
for b in redis-server redis-cli redis-benchmark; do ln -s "$REDIS_SRC/src/$b" "$work/src/$b"; done
if [ "${EVAL_ONLY:-0}" = 1 ]; then
  sed -i 's/^foreach is_eval {0 1} {/foreach is_eval {1} {/' "$work/tests/unit/scripting.tcl"
fi
"${KVSERVER:-target/release/kvserver}" --port "$PORT" --save '' >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
args=()
for u in "${UNITS[@]}"; do args+=(--single "unit/$u"); done
# TCL_ARGS: more runtest options, e.g. TCL_ARGS="--skiptest /KILL" to go past the tests that
# want BUSY replies while a script runs.
read -r -a extra <<<"${TCL_ARGS:-}"
args+=("${extra[@]}")
(cd "$work" && timeout "${TIMEOUT:-600}" ./runtest --host 127.0.0.1 --port "$PORT" "${args[@]}" \
  --clients 1 --ignore-encoding --ignore-digest --no-latency --durable --tags -needs:debug) \
  >"$work/run.log" 2>&1
sed 's/\x1b\[[0-9;]*m//g' "$work/run.log" | grep -E '^\[(ok|err|exception)\]' | tee "${LOG:-/dev/null}" \
  | awk '{print $1}' | sort | uniq -c
sed 's/\x1b\[[0-9;]*m//g' "$work/run.log" | grep -E '^\[(err|exception)\]'
