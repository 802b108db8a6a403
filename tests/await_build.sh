#!/bin/bash
# await_build.sh DIR CMD [ARG...]: runs CMD once the build tree DIR is built.
#
# scripts/test.sh builds the sanitized tree while the VM tests already run
# (RDMACM_AWAIT_BUILDS=1 in their environment) and writes DIR/.build-status
# when its build has ended: "ok", or "failed" (then CMD does not run and this
# fails). Without RDMACM_AWAIT_BUILDS, CMD runs at once (the tree is
# whatever the developer built). The wait is bounded (RDMACM_AWAIT_SECONDS,
# default 1800): a build that never ends is a failure, not a hang.
set -u
dir=$1; shift
if [ -n "${RDMACM_AWAIT_BUILDS:-}" ]; then
	t0=$SECONDS bound=${RDMACM_AWAIT_SECONDS:-1800}
	until [ -s "$dir/.build-status" ]; do
		((SECONDS - t0 < bound)) || { echo "await_build: $dir not built after $bound s"; exit 1; }
		sleep 1
	done
	status=$(cat "$dir/.build-status")
	[ "$status" = ok ] || { echo "await_build: the build of $dir failed (scripts/test.sh's asan phase)"; exit 1; }
	echo "await_build: $dir built; waited $((SECONDS - t0)) s"
fi
exec "$@"
