#!/bin/bash
# Runs each argument as a command (in one VM boot), reports each, and fails if
# any failed, so one broken check does not hide the others. A command written
# "& CMD" runs in the background from the start, beside the others (for one
# that mostly waits on the kernel), its output printed after theirs.
#
# The rerun rule for GoogleTest binaries (a command whose output has gtest's
# "[  FAILED  ] Suite.Test" lines): the failed tests are run once more at
# once, by --gtest_filter, and the second verdict counts; each prints
# `FLAKY batch <Suite.Test>: <first failure>`. Never after a sanitizer report
# or a signal (the binaries run on our library), never for a command that is
# not a GoogleTest binary (the harnesses among them rerun their own cases).
set -u
# A sanitizer report is judged by the harnesses' own rule (one list of what
# such a report looks like: tests/rxe/runner/judge.py).
judge=$(dirname "$(readlink -f "$0")")/runner/run.py
failed=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# run_one CMD OUT: runs CMD (its output on stdout and in OUT) with the rerun
# rule; prints its verdict; its status is CMD's. A FLAKY line per rerun test.
run_one() {
	local cmd=$1 out=$2 t0=$SECONDS rc tests t first filter
	echo "=== $cmd"
	bash -c "$cmd" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	if [ "$rc" != 0 ] && [ "$rc" -lt 128 ] && ! "$judge" judge sanitizer "$out"; then
		# gtest prints each failed test twice (as it ends and in the summary).
		tests=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/]*\.[A-Za-z0-9_/]*\)\( (.*\)\{0,1\}$/\1/p' "$out" | sort -u)
		if [ -n "$tests" ]; then
			for t in $tests; do
				# The first line of its failure: gtest prints the failure's
				# text, then the test's FAILED line.
				first=$(awk -v t="$t" '
					/^\[  FAILED  \] / { if (index($0, "] " t " (") || $0 == "[  FAILED  ] " t) { print w; exit } w = ""; next }
					w == "" && /Failure|error|Expected|Value of|Which is/ { w = substr($0, 1, 160) }' "$out")
				echo "FLAKY batch $t: ${first:-failed}"
			done
			filter=$(echo $tests | tr ' ' ':')
			echo "=== once more: $cmd --gtest_filter=$filter"
			bash -c "$cmd --gtest_filter='$filter'" 2>&1 | tee "$out"
			rc=${PIPESTATUS[0]}
		fi
	fi
	t=$((SECONDS - t0))
	if [ "$rc" = 0 ]; then echo "=== PASS (${t} s): $cmd"; else echo "=== FAIL ($rc, ${t} s): $cmd"; fi
	return "$rc"
}

bg=()
for cmd in "$@"; do
	case $cmd in
	'& '*)
		n=${#bg[@]}
		run_one "${cmd#& }" "$dir/bg$n.out" > "$dir/bg$n.log" 2>&1 &
		bg+=($!) ;;
	esac
done
for cmd in "$@"; do
	case $cmd in '& '*) continue ;; esac
	run_one "$cmd" "$dir/out" | tee -a "$dir/fg.log"
	[ "${PIPESTATUS[0]}" = 0 ] || failed=$((failed + 1))
done
for n in "${!bg[@]}"; do
	wait "${bg[n]}" || failed=$((failed + 1))
	cat "$dir/bg$n.log"
done
flaky=$(cat "$dir"/*.log 2>/dev/null | grep -c '^FLAKY batch ')
[ "$flaky" = 0 ] || echo "=== $flaky GoogleTest cases needed a rerun (FLAKY lines above)"
echo "=== $# commands, $failed failed"
[ "$failed" = 0 ]
