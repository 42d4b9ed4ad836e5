#!/bin/bash
# Build the hardened library's ablation variants (docs/RELIABILITY.md,
# "Twenty-ninth session, abl29"): each in build-abl-<name>/, each with ONE
# protection off (src/internal.h, TES_SECURE_NO_*), the floor with all of
# them off, the checks (a-c) off or only they on, and secure and the floor
# with the small classes' bins (TES_SECURE_SMALL_BINS). Prints the path of every libtessera-secure.so built.
# Usage: bash bench/abl/build_variants.sh [name ...]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/../.."
declare -A flags=(
  [nocanary]=-DTES_SECURE_NO_CANARY=1
  [noproof]=-DTES_SECURE_NO_FREE_PROOF=1
  [nolink]=-DTES_SECURE_NO_LINK_CHECK=1
  [noshuffle]=-DTES_SECURE_NO_SHUFFLE=1
  [nodelay]=-DTES_SECURE_NO_DELAY=1
  [noguard]=-DTES_SECURE_NO_GUARD=1
  [floor]=-DTES_SECURE_ABL_FLOOR=1
  [checksoff]="-DTES_SECURE_NO_CANARY=1 -DTES_SECURE_NO_FREE_PROOF=1 -DTES_SECURE_NO_LINK_CHECK=1"
  [checkson]="-DTES_SECURE_NO_SHUFFLE=1 -DTES_SECURE_NO_DELAY=1 -DTES_SECURE_NO_GUARD=1"
  [sbins]=-DTES_SECURE_SMALL_BINS=1
  [floorbins]="-DTES_SECURE_ABL_FLOOR=1 -DTES_SECURE_SMALL_BINS=1"
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(nocanary noproof nolink noshuffle nodelay noguard floor checksoff checkson sbins floorbins)
for name in "${names[@]}"; do
  dir=build-abl-$name
  [ -f "$dir/CMakeCache.txt" ] || cmake -S . -B "$dir" -DCMAKE_C_FLAGS="${flags[$name]}" >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target tessera_secure >/dev/null
  echo "$dir/libtessera-secure.so"
done
