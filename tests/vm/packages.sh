# shellcheck shell=bash
# rxe-vm's host packages: installs whichever of PACKAGES (and, for --siw,
# SIW_PACKAGES) is missing; apt-cache and apt-get download for the kernel's
# packages. Sourced by rxe-vm (uses its msg, die, SIW, TMPBASE).

APT_UPDATED=0
apt_update_once() {
	[ "$APT_UPDATED" = 1 ] && return
	msg "apt-get update"
	apt-get update -qq >/dev/null 2>&1 || msg "apt-get update failed (continuing)"
	APT_UPDATED=1
}

ensure_packages() {
	local missing=() p have want=$PACKAGES
	[ "$SIW" = 1 ] && want="$want $SIW_PACKAGES"
	# shellcheck disable=SC2086
	have=" $(dpkg-query -W -f='${Package}=${Status} ' $want 2>/dev/null || true) "
	for p in $want; do
		[[ $have == *" $p=install ok installed "* ]] || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return
	[ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}) and not root: install them first"
	msg "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	local log; log=$(mktemp "$TMPBASE/rxe-vm-apt.XXXXXX")
	if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
		apt_update_once
		if ! apt-get install -y --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
			tail -n 30 "$log" >&2
			rm -f "$log"
			die "apt-get install failed"
		fi
	fi
	rm -f "$log"
}

# The candidate version of package $1 (apt-cache: about a second here).
pkg_version() {
	apt-cache show --no-all-versions "$1" 2>/dev/null | awk '/^Version:/ { print $2; exit }'
}

# apt-get download into directory $1 of the packages $2...
apt_download() {
	local dir=$1
	shift
	(cd "$dir" && apt-get download -qq -o APT::Sandbox::User=root "$@" >&2)
}
