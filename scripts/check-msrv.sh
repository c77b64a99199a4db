#!/usr/bin/env bash
# The minimum Rust version check: every crate of the workspace declares the workspace's
# `rust-version`, and the workspace builds with exactly that toolchain.
#
#   scripts/check-msrv.sh
#
# When the default toolchain is that version, the build and tests of `.ci/run` are the MSRV
# build. Otherwise a rustup toolchain of that version must be installed, and the workspace is
# checked with it (`cargo +TOOLCHAIN check`); with neither it fails, naming the versions,
# instead of passing unchecked. It also fails when a crate of the workspace declares another
# rust-version, or a dependency in Cargo.lock a newer one.
set -euo pipefail
cd "$(dirname "$0")/.."

declared=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[[ -n "$declared" ]] || { echo "check-msrv: no rust-version in Cargo.toml's [workspace.package]" >&2; exit 1; }

check_versions=$(cat <<'PY'
import json, sys
declared = tuple(int(x) for x in sys.argv[1].split("."))
meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
bad = []
for p in meta["packages"]:
    rv = p.get("rust_version")
    if p["id"] in members:
        if rv is None or tuple(int(x) for x in rv.split(".")) != declared + (0,) * (len(rv.split(".")) - len(declared)):
            bad.append(f"{p['name']}: rust-version {rv!r}, the workspace's is {sys.argv[1]!r}")
    elif rv is not None and tuple(int(x) for x in rv.split("."))[:len(declared)] > declared:
        bad.append(f"dependency {p['name']} {p['version']} needs Rust {rv}")
if bad:
    sys.exit("check-msrv: " + "; ".join(bad))
PY
)
cargo metadata --format-version 1 --locked | python3 -c "$check_versions" "$declared"

installed=$(rustc --version | sed -n 's/^rustc \([0-9]*\.[0-9]*\)\(\.[0-9]*\)\?.*/\1/p')
if [[ "$installed" == "${declared%.*}" || "$installed" == "$declared" ]]; then
    echo "check-msrv: the default toolchain ($(rustc --version)) is the declared rust-version" \
        "${declared}: the workspace's build and tests in .ci/run are the MSRV build"
    exit 0
fi
toolchain=$(rustup toolchain list 2>/dev/null | sed -n "s/^\(${declared//./\\.}\(\.0\)\?-[^ ]*\).*/\1/p" | head -1)
if [[ -n "$toolchain" ]]; then
    echo "check-msrv: checking the workspace with ${toolchain}"
    cargo "+${toolchain}" check --workspace --all-features --all-targets --locked
    exit 0
fi
echo "check-msrv: rust-version is ${declared} but the toolchain is $(rustc --version) and no" \
    "${declared} toolchain is installed: the MSRV would go unchecked (install it, or declare" \
    "a version a build here checks)" >&2
exit 1
