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

# apt_download_near DIR PKG VER: PKG at VER into DIR, else at another version
# of the same upstream release (a package Debian uploaded again alone: the
# archive keeps only its newest, e.g. linux-kbuild-6.1 at 6.1.192-3 beside an
# image still at 6.1.192-2). Fails if there is none.
apt_download_near() {
	local dir=$1 pkg=$2 ver=$3 v
	apt_download "$dir" "$pkg=$ver" 2>/dev/null && return
	for v in $(apt-cache madison "$pkg" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }'); do
		[ "${v%-*}" = "${ver%-*}" ] && [ "$v" != "$ver" ] || continue
		msg "$pkg=$ver is not in the archive: taking $v, the same upstream release"
		apt_download "$dir" "$pkg=$v" && return
	done
	return 1
}
