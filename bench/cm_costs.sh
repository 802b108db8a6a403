#!/bin/bash
# What a connection and an id cost, rdma-core's library and ours side by side:
# instructions per connection (cm_instructions.sh), system calls and ucma
# commands per connection (cm_syscalls.sh), ids at scale (id_scale.sh), one
# after the other. The README's performance table comes from this command
# without --quick; --quick (small counts, one round) only keeps it working;
# --smoke (bench.smoke; no figures) runs each part once: one callgrind and one
# strace run of 2 connections on ours (no start-up run: --small 0, no
# rdma-core column: --ours-only), 10 ids on each library.
#
#   bench/cm_costs.sh [--lib PATH] [--bin PATH/id_scale] [--quick | --smoke]
#
# Run it where there is an RDMA device, e.g. in the Soft-RoCE VM:
#   tests/vm/rxe-vm auto -- bench/cm_costs.sh
set -euo pipefail
HERE=$(dirname "$0")
LIB=$HERE/../build/src/librdmacm.so.1
BIN=$HERE/../build/bench/id_scale
QUICK='' SMOKE=''
while [ $# -gt 0 ]; do
	case $1 in
	--lib) LIB=$2; shift ;;
	--bin) BIN=$2; shift ;;
	--quick) QUICK=1 ;;
	--smoke) SMOKE=1 ;;
	*) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$SMOKE" ]; then
	"$HERE/cm_instructions.sh" --lib "$LIB" --small 0 --large 2 --top 3 --ours-only
	echo
	"$HERE/cm_syscalls.sh" --lib "$LIB" --small 0 --large 2 --ours-only
	echo
	"$HERE/id_scale.sh" --lib "$LIB" --bin "$BIN" --counts 10 --rounds 1
elif [ -n "$QUICK" ]; then
	"$HERE/cm_instructions.sh" --lib "$LIB" --small 5 --large 15 --top 5
	echo
	"$HERE/cm_syscalls.sh" --lib "$LIB" --small 5 --large 15
	echo
	"$HERE/id_scale.sh" --lib "$LIB" --bin "$BIN" --counts "100 1000" --rounds 1
else
	"$HERE/cm_instructions.sh" --lib "$LIB"
	echo
	"$HERE/cm_syscalls.sh" --lib "$LIB"
	echo
	"$HERE/id_scale.sh" --lib "$LIB" --bin "$BIN"
fi
