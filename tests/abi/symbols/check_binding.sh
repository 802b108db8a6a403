#!/bin/bash
# Runs a program built against rdma-core (headers and library) three ways:
# as built (the reference), with our library in LD_PRELOAD, and with our
# library first on LD_LIBRARY_PATH under the same soname. Passes when both of
# ours print what the reference prints (apart from the serving file) and the
# dynamic linker's own trace shows the calls bound to our file.
set -u
probe=$1 ours=$2
ours_dir=$(dirname "$ours")
fail=0
say() { echo "$*"; }
bad() { echo "FAIL: $*"; fail=1; }

reference=$("$probe") || bad "reference run failed"
case "$reference" in *"from: $ours_dir/"*) bad "reference run already used ours";; esac

check_mode() {  # $1 = label, rest = env assignments
  local label=$1; shift
  local out trace
  out=$(env "$@" "$probe") || { bad "$label: probe exited non-zero"; return; }
  if [ "$(grep -v '^rdma_create_id from:' <<<"$out")" != "$(grep -v '^rdma_create_id from:' <<<"$reference")" ]; then
    bad "$label: behaviour differs from rdma-core"
    diff <(echo "$reference") <(echo "$out")
  fi
  grep -q "^rdma_create_id from: $ours_dir/librdmacm.so.1" <<<"$out" \
    || bad "$label: rdma_create_id not served by $ours"
  trace=$(env "$@" LD_DEBUG=bindings "$probe" 2>&1 >/dev/null)
  for sym in rdma_event_str rdma_create_event_channel rdma_get_devices; do
    grep -Eq "to $ours_dir/librdmacm.so.1 \[0\]: normal symbol \`$sym' \[RDMACM_1.0\]" <<<"$trace" \
      && say "$label: $sym bound to our librdmacm.so.1 [RDMACM_1.0]" \
      || bad "$label: $sym not bound to ours"
  done
}

check_mode LD_PRELOAD LD_PRELOAD="$ours"
check_mode LD_LIBRARY_PATH LD_LIBRARY_PATH="$ours_dir"
# Under the soname path rdma-core's file must not even be loaded.
loaded=$(LD_LIBRARY_PATH="$ours_dir" LD_TRACE_LOADED_OBJECTS=1 "$probe" | grep librdmacm)
say "LD_LIBRARY_PATH: loads $(echo $loaded)"
[ "$(grep -c librdmacm <<<"$loaded")" = 1 ] && grep -q "=> $ours_dir/librdmacm.so.1" <<<"$loaded" \
  || bad "LD_LIBRARY_PATH: expected only our librdmacm.so.1 to be loaded"
[ $fail = 0 ] && echo "binding: OK" || echo "binding: FAIL"
exit $fail
