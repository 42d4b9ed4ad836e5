#!/usr/bin/env bash
# redis_soak.sh — redis-server on libtessera under a bounded redis-benchmark
# load, with its data checked before and after.
#
#   redis_soak.sh LIBTESSERA_SO [REQUESTS]      (default 20000 requests per test)
#
# Starts redis-server on 127.0.0.1 at a private port with LD_PRELOAD set to
# the library, proves from /proc/PID/maps that the library is mapped, stores
# 2000 known keys (small strings, a list, a hash, and 1 MiB values that take
# the allocator's large path), runs redis-benchmark (SET/GET/INCR/LPUSH/LPOP/
# SADD/HSET/MSET with random keys that cannot collide with ours), reads every
# known key back and compares, then shuts the server down and requires a
# clean exit. Skips (77) with a message when redis is not installed.
# Exit 0: data intact and clean shutdown; 1: anything else.
set -u
lib=${1:?usage: redis_soak.sh LIBTESSERA_SO [REQUESTS]}
requests=${2:-20000}

for tool in redis-server redis-cli redis-benchmark; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not installed (Debian: apt-get install redis-server redis-tools)"
    exit 77
  fi
done
[ -f "$lib" ] || { echo "FAIL: $lib does not exist"; exit 1; }

work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$work/server.log" ] && tail -20 "$work/server.log"; exit 1; }

# A private port: derived from our pid, moved on if something answers there.
port=$((20000 + $$ % 20000))
for _ in 1 2 3 4 5 6 7 8 9 10; do
  if ! redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then break; fi
  port=$((port + 1))
done

LD_PRELOAD="$lib" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work" --logfile "$work/server.log" --daemonize no --protected-mode yes &
server_pid=$!
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

for _ in $(seq 1 100); do
  [ "$(cli ping 2>/dev/null)" = "PONG" ] && break
  kill -0 "$server_pid" 2>/dev/null || fail "redis-server exited at start"
  sleep 0.1
done
[ "$(cli ping 2>/dev/null)" = "PONG" ] || fail "redis-server did not answer on port $port"
grep -q "$(basename "$lib")" "/proc/$server_pid/maps" || fail "$lib is not mapped into redis-server"
echo "redis-server pid $server_pid on port $port, $(basename "$lib") mapped"

# Known data: value i is "value-i-" followed by i%300 x's (lengths vary, so
# several size classes are used); expected.txt holds them in key order.
awk 'BEGIN { for (i = 1; i <= 2000; i++) { v = "value-" i "-"; for (j = 0; j < i % 300; j++) v = v "x"; print v } }' \
  >"$work/expected.txt"
{
  awk '{ print "SET tessera:check:" NR " " $0 }' "$work/expected.txt"
  for i in $(seq 1 500); do printf 'RPUSH tessera:list item-%d\n' "$i"; done
  for i in $(seq 1 500); do printf 'HSET tessera:hash field-%d %d\n' "$i" $((i * i)); done
} >"$work/load.txt"
cli <"$work/load.txt" >"$work/load.out" || fail "loading known keys"
[ "$(grep -c '^OK$' "$work/load.out")" -eq 2000 ] || fail "not every SET answered OK"
head -c 1048576 /dev/zero | tr '\0' 'L' >"$work/large.txt"
for i in 1 2 3 4; do
  cli -x SET "tessera:large:$i" <"$work/large.txt" >/dev/null || fail "SET large value $i"
done

# The load. Keys are key:__rand_int__ etc.; ours start with tessera:.
redis-benchmark -h 127.0.0.1 -p "$port" -n "$requests" -c 20 -r 50000 -d 256 -q \
  -t set,get,incr,lpush,lpop,sadd,hset,mset >"$work/bench.txt" 2>&1 ||
  fail "redis-benchmark failed: $(tail -3 "$work/bench.txt")"
tr '\r' '\n' <"$work/bench.txt" | grep -E 'requests per second' | sed 's/^/  /'
kill -0 "$server_pid" 2>/dev/null || fail "redis-server died during the benchmark"

# Read everything back.
seq 1 2000 | sed 's/^/GET tessera:check:/' | cli >"$work/get.out" || fail "reading known keys"
[ "$(wc -l <"$work/get.out")" -eq 2000 ] || fail "read back $(wc -l <"$work/get.out") of 2000 keys"
if ! cmp -s "$work/get.out" "$work/expected.txt"; then
  diff "$work/expected.txt" "$work/get.out" | head -6
  fail "$(diff "$work/expected.txt" "$work/get.out" | grep -c '^>') of 2000 known keys changed"
fi
[ "$(cli LLEN tessera:list)" = "500" ] || fail "list length changed"
[ "$(cli LINDEX tessera:list 249)" = "item-250" ] || fail "list element changed"
[ "$(cli HLEN tessera:hash)" = "500" ] || fail "hash size changed"
[ "$(cli HGET tessera:hash field-77)" = "5929" ] || fail "hash field changed"
for i in 1 2 3 4; do
  cli GET "tessera:large:$i" >"$work/large.out"
  cmp -s <(head -c 1048576 "$work/large.out") "$work/large.txt" ||
    fail "1 MiB value $i changed"
done
used=$(cli INFO memory | tr -d '\r' | sed -n 's/^used_memory_human://p')
keys=$(cli DBSIZE)

cli SHUTDOWN NOSAVE >/dev/null 2>&1
status=0
wait "$server_pid" || status=$?
server_pid=
[ "$status" -eq 0 ] || fail "redis-server exited with status $status after SHUTDOWN"
if grep -qiE 'tessera.*(error|invalid|corrupt)|double free' "$work/server.log"; then
  fail "allocator errors in the server log"
fi
echo "OK: 8 x $requests benchmark requests, 2000 strings + list + hash + 4 x 1 MiB values intact," \
  "$keys keys at the end, used_memory $used, clean shutdown"
exit 0
