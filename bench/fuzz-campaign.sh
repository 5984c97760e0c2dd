#!/usr/bin/env bash
# Runs every fuzz target of servicegate for a while and prints one line per
# target: its package, its name, the time given and the outcome. A target that
# fails leaves its input under the package's testdata/fuzz/<Target>/, where
# `go test` then runs it as a regression seed; commit it with the fix.
#
#   bench/fuzz-campaign.sh            # 60s per target
#   FUZZTIME=5m bench/fuzz-campaign.sh
#   bench/fuzz-campaign.sh ./signature ./token   # only these packages
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-60s}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
failed=0
for pkg in $(go list "${pkgs[@]}"); do
	for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz'); do
		log=$(mktemp)
		start=$(date +%s)
		if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" >"$log" 2>&1; then
			outcome="ok"
		else
			outcome="FAILED (see testdata/fuzz/$target)"
			failed=$((failed + 1))
			tail -20 "$log" >&2
		fi
		execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
		echo "${pkg#github.com/servicegate/servicegate/} $target $fuzztime $(( $(date +%s) - start ))s execs=${execs:-?} $outcome"
		rm -f "$log"
	done
done
exit $((failed > 0))
