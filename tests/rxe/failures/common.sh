# shellcheck shell=bash
# What local.sh and host_death_{server,client}.sh share: their options (each
# --NAME VALUE of OPTS sets the variable NAME in capitals, which the script
# declares first: one still empty then is missing), the two libraries, the
# failures counted, and procs.sh's waits (nap, wait_line, wait_until: polling
# without starting a program, each costing a few tenths of a second of CPU
# under TCG).
ME=$(basename "$0") usage="usage: $(basename "$0")"
for o in $OPTS; do usage+=" --$o ${o^^}"; done
while [ $# -gt 0 ]; do
	o=${1#--}
	[[ $# -gt 1 && $1 == --* && " $OPTS " == *" $o "* ]] || { echo "$ME: unknown argument $1" >&2; exit 2; }
	printf -v "${o^^}" '%s' "$2"
	shift 2
done
for o in $OPTS; do o=${o^^}; [ -n "${!o}" ] || { echo "$usage" >&2; exit 2; }; done
REF=${RDMACM_SYSTEM_LIB:-/usr/lib/x86_64-linux-gnu/librdmacm.so.1}
OURDIR=$(dirname "$LIB")
ours() { env LD_LIBRARY_PATH="$OURDIR" "$@"; } # CMD on our library
ref() { env LD_PRELOAD="$REF" "$@"; }          # CMD on rdma-core's
# shellcheck source=../procs.sh
. "$(dirname "$0")/../procs.sh"

failed=0
fail() { echo "FAIL${WHO:+ ($WHO)}: $*"; failed=$((failed + 1)); }
# The closing line, and the status: 0 only if nothing failed.
finish() { echo "=== $1: $failed failed"; [ "$failed" = 0 ]; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; } # A - B, s

# start NAME CMD...: runs CMD in the background (under a shell of its own, so
# PID[NAME] is CMD's parent); its output in $LOG/NAME.log, then its status in
# NAME.rc and the time it ended in NAME.end.
declare -A PID
# shellcheck disable=SC2034 # PID is read by host_death_client.sh
start() {
	local name=$1
	shift
	( "$@" > "$LOG/$name.log" 2>&1; echo $? > "$LOG/$name.rc"; echo "$EPOCHREALTIME" > "$LOG/$name.end" ) &
	PID[$name]=$!
}
