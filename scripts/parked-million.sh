#!/usr/bin/env bash
# Memory per parked thread at scale (issue 16): one fresh process parks THREADS threads (default
# 1,000,000) waiting for input, on a database file under the build's target/tmp, and prints
# their resident-set cost per thread, the peak, and the marginal cost (the growth over the
# second half of the threads, once the bounded caches have filled). Not part of the default
# benchmark run: it takes minutes and about 2 GB of memory.
#
#   scripts/parked-million.sh                    # 1,000,000 threads waiting for input
#   scripts/parked-million.sh 200000 sleeping    # fewer threads; or sleeping, paused
#   CAIRN_BENCH_PAGE_CACHE_BYTES=16777216 scripts/parked-million.sh   # a 16 MiB page cache
#
# Output: the child's line, `CHILD <KiB per thread> <peak KiB per thread> <marginal KiB per
# thread>`, as the memory section of `cargo bench -p cairn-benches --bench engine` reads it.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-1000000}"
which="${2:-parked}"
case "$which" in
    parked | sleeping | paused) ;;
    *) echo "usage: $0 [THREADS] [parked|sleeping|paused]" >&2; exit 2 ;;
esac
CAIRN_BENCH_CHILD="$which" CAIRN_BENCH_MEMORY_THREADS="$threads" \
    cargo bench -p cairn-benches --bench engine
