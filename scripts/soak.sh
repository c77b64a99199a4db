#!/usr/bin/env bash
# The soak tier of Cairn's reliability suite: the larger figures of docs/reliability.md, in a
# time budget.
#
#   scripts/soak.sh --minutes M          # e.g. --minutes 20; the full soak is --minutes 400
#   scripts/soak.sh --minutes M --parts tests|fuzz|all    # default all
#   scripts/soak.sh --minutes M --parts fuzz --workers 2  # two fuzzing processes per target
#   nohup scripts/soak.sh --minutes 60 > /dev/null 2>&1 &     # in the background
#
# Full-size figures (reached at --minutes 400 on 2 cores; smaller budgets scale them down):
#   - T1: 100,000 random crash cases (any model, any op, a third with a second crash during
#     recovery) over the three canonical workflows;
#   - T2: 5,000 `kill -9` of a child process, and 5,000 aborts at chosen steps;
#   - T4: 50,000 corruptions of engine-written records;
#   - T8: 1,000 threads x 50 steps with crashes;
#   - PostgreSQL: the multi-worker chaos test (4 worker processes, kill -9, SIGSTOP past the
#     lease, pg_terminate_backend, a server restart) at 2,000 threads a run, for 15% of the
#     budget and 30 minutes at most;
#   - T5: one hour per fuzz target (every target in fuzz/Cargo.toml); with --workers W each
#     target runs W libFuzzer processes on one corpus, so an hour of fuzzing per target takes
#     60/W minutes of wall time (W at most the number of cores).
# The budget is split: 35% crash cases, 10% processes, 5% corruption and load, up to 15%
# PostgreSQL chaos, and the rest fuzzing.
# Each part runs in chunks until its share of the time is used or its full-size figure is
# reached, so a short budget still produces every kind of figure.
#
# Output: every RELIABILITY line (and one per fuzz target) is appended to
# docs/reliability/YYYY-MM-DD.txt, with a header naming the commit and the machine; progress
# goes to target/soak/progress.log. Tests run with `--release` (the suite's code is then
# optimised; the default `cargo test` runs the same tests at PR size). Exits non-zero if any
# chunk or fuzz target failed; crash inputs stay in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=20
parts=all
workers=1
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="$2"; shift 2 ;;
        --minutes=*) minutes="${1#*=}"; shift ;;
        --parts) parts="$2"; shift 2 ;;
        --parts=*) parts="${1#*=}"; shift ;;
        --workers) workers="$2"; shift 2 ;;
        --workers=*) workers="${1#*=}"; shift ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[[ "$minutes" =~ ^[0-9]+$ ]] && [ "$minutes" -gt 0 ] || { echo "--minutes takes a positive integer" >&2; exit 2; }
case "$parts" in all|tests|fuzz) ;; *) echo "--parts is tests, fuzz or all" >&2; exit 2 ;; esac
[[ "$workers" =~ ^[0-9]+$ ]] && [ "$workers" -ge 1 ] && [ "$workers" -le "$(nproc)" ] \
    || { echo "--workers takes an integer from 1 to the number of cores ($(nproc))" >&2; exit 2; }

budget=$((minutes * 60))
day="$(date -u +%Y-%m-%d)"
out="docs/reliability/$day.txt"
mkdir -p docs/reliability target/soak
log="target/soak/progress.log"
: > "$log"
status=0

{
    echo "# Cairn soak run $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# commit ${CAIRN_SOAK_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
    echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
    echo "# budget: --minutes $minutes --parts $parts --workers $workers"
} >> "$out"

note() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$log"; }
elapsed() { echo $(( $(date +%s) - start )); }

test_cmd=(cargo test --release -p cairn --test reliability)
# The PostgreSQL chaos test needs the backend (and Debian's postgresql package, installed below).
pg_cmd=(cargo test --release -p cairn --features postgres --test reliability)

start=$(date +%s)
if [ "$parts" != fuzz ]; then
note "building the suite (release; not counted in the budget)"
"${test_cmd[@]}" --no-run >> "$log" 2>&1
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >> "$log" 2>&1
fi
"${pg_cmd[@]}" --no-run >> "$log" 2>&1
start=$(date +%s)

# Runs one test of the suite with the given environment; appends its RELIABILITY lines.
run_test() {
    local name="$1"; shift
    local chunk_log
    chunk_log="$(mktemp)"
    if env "$@" "${test_cmd[@]}" "$name" -- --exact --test-threads=1 > "$chunk_log" 2>&1; then
        :
    else
        status=1
        note "FAILED: $name $*"
        grep -E -A3 "panicked|failures:|^case " "$chunk_log" | head -40 | tee -a "$log" || true
    fi
    # The test runner may print "test name ... " on the same line before a summary line.
    grep -oE 'RELIABILITY .*' "$chunk_log" | tee -a "$log" >> "$out" || true
    rm -f "$chunk_log"
}

# Repeats `run_test` in chunks until `share` seconds have passed or `full` units were run.
chunks() {
    local share="$1" full="$2" chunk="$3" name="$4" var="$5"; shift 5
    local until=$(( $(elapsed) + share )) done_units=0 i=0
    while [ "$(elapsed)" -lt "$until" ] && [ "$done_units" -lt "$full" ]; do
        local n=$(( full - done_units < chunk ? full - done_units : chunk ))
        run_test "$name" "$var=$n" "$@" "CAIRN_CRASH_SEED=$(( 0x50A0 + i ))" \
            "CAIRN_REL_T2_SEED=$(( 0x50A0 + i ))" "CAIRN_REL_T4_SEED=$(( 0x50A1 + 2 * i ))"
        done_units=$(( done_units + n ))
        i=$(( i + 1 ))
    done
    echo "RELIABILITY soak_total test=$name $var=$done_units chunks=$i" | tee -a "$log" >> "$out"
}

note "T1 random crash cases"
chunks $(( budget * 35 / 100 )) 100000 2000 crash_points::t1_random_cases CAIRN_REL_RANDOM_CASES
note "T2 kills and aborts"
chunks $(( budget * 10 / 100 )) 5000 250 processes::t2_kill_and_abort_real_processes \
    CAIRN_REL_KILLS CAIRN_REL_ABORTS=250
note "T4 corruption"
chunks $(( budget * 3 / 100 )) 50000 2500 corruption::t4_corruption_of_engine_records CAIRN_REL_CORRUPTIONS
note "PostgreSQL workers under chaos (2,000 threads a run, 30 minutes at most)"
pg_share=$(( budget * 15 / 100 < 1800 ? budget * 15 / 100 : 1800 ))
pg_until=$(( $(elapsed) + pg_share )) pg_runs=0
while [ "$(elapsed)" -lt "$pg_until" ] || [ "$pg_runs" -eq 0 ]; do
    pg_log="$(mktemp)"
    if CI=true CAIRN_REL_PG_THREADS=2000 CAIRN_REL_PG_SECONDS=1200 CAIRN_REL_SEED=$(( 0x5EED0 + pg_runs )) \
        "${pg_cmd[@]}" pg_workers::pg_workers_chaos -- --exact --test-threads=1 > "$pg_log" 2>&1; then
        :
    else
        status=1
        note "FAILED: pg_workers_chaos run $pg_runs"
        grep -E -A3 "panicked|failures:" "$pg_log" | head -40 | tee -a "$log" || true
    fi
    grep -oE 'RELIABILITY .*' "$pg_log" | tee -a "$log" >> "$out" || true
    rm -f "$pg_log"
    pg_runs=$(( pg_runs + 1 ))
done
echo "RELIABILITY soak_total test=pg_workers_chaos runs=$pg_runs" | tee -a "$log" >> "$out"
note "T8 load"
run_test load::t8_load_with_crashes CAIRN_REL_LOAD_THREADS=$(( minutes >= 60 ? 1000 : 400 )) \
    CAIRN_REL_LOAD_CRASHES=5
fi

# Fuzzing: the rest of the budget (all of it with --parts fuzz), split over every target, at
# most an hour each. Each target is built on its own (`cargo fuzz build` of the whole workspace
# would also build helper binaries that are not fuzz targets).
if [ "$parts" != tests ]; then
targets=($(awk '/^\[\[bin\]\]/ {bin=1} bin && /^name *=/ {gsub(/[" ]/, "", $0); sub(/name=/, "", $0); print; bin=0}' fuzz/Cargo.toml))
if ! cargo fuzz --version > /dev/null 2>&1; then
    note "installing cargo-fuzz"
    cargo install cargo-fuzz --locked >> "$log" 2>&1
fi
note "building ${#targets[@]} fuzz targets (not counted in the budget)"
build_started=$(date +%s)
built=()
for target in "${targets[@]}"; do
    # The fuzz workspace builds in its own target directory: sanitizer-coverage objects must
    # not mix with the suite's.
    if (cd fuzz && env -u CARGO_TARGET_DIR cargo fuzz build --sanitizer=none "$target" >> "../$log" 2>&1); then
        built+=("$target")
    else
        note "FAILED: fuzz target $target does not build (see $log)"
        echo "RELIABILITY T5_fuzz target=$target build_failed=1" >> "$out"
        status=1
    fi
done
start=$(( start + $(date +%s) - build_started ))
left=$(( budget - $(elapsed) ))
# `per` is wall time per target; each of the W workers fuzzes for all of it, so a target gets
# W x per seconds of fuzzing, at most an hour.
per=$(( left / (${#built[@]} > 0 ? ${#built[@]} : 1) ))
[ "$per" -gt $(( 3600 / workers )) ] && per=$(( 3600 / workers ))
[ "$per" -lt 30 ] && per=30
for target in "${built[@]+"${built[@]}"}"; do
    note "fuzz $target for ${per}s with $workers worker(s)"
    mkdir -p "fuzz/corpus/$target" "fuzz/artifacts/$target"
    scratch="$(mktemp -d)"
    fuzz_log="$(mktemp)"
    parallel=()
    # libFuzzer's -jobs: W processes sharing the scratch corpus, each logging to fuzz-<n>.log.
    [ "$workers" -gt 1 ] && parallel=(-jobs="$workers" -workers="$workers")
    rm -f fuzz/fuzz-*.log
    if (cd fuzz && env -u CARGO_TARGET_DIR cargo fuzz run --sanitizer=none "$target" "$scratch" "corpus/$target" -- \
        -max_total_time="$per" -max_len=10000 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 "${parallel[@]+"${parallel[@]}"}" > "$fuzz_log" 2>&1); then
        crashes=0
    else
        crashes=1
        status=1
    fi
    for worker_log in fuzz/fuzz-*.log; do
        if [ -e "$worker_log" ]; then cat "$worker_log" >> "$fuzz_log"; rm -f "$worker_log"; fi
    done
    execs=$(grep -E '^stat::number_of_executed_units' "$fuzz_log" | awk '{n += $2} END {print n + 0}')
    new=$(grep -E '^stat::new_units_added' "$fuzz_log" | awk '{n += $2} END {print n + 0}')
    echo "RELIABILITY T5_fuzz target=$target secs=$per workers=$workers fuzz_secs=$(( per * workers )) execs=$execs new_units=$new crashes=$crashes" \
        | tee -a "$log" >> "$out"
    [ "$crashes" = 0 ] || grep -E -A5 'panicked|ERROR' "$fuzz_log" | head -20 | tee -a "$log"
    rm -rf "$scratch" "$fuzz_log"
done
fi

echo "RELIABILITY soak_end minutes_budget=$minutes secs=$(elapsed) status=$status" | tee -a "$log" >> "$out"
note "results in $out"
exit "$status"
