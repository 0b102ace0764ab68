#!/bin/sh
# continuityd package, after installation or upgrade (.deb postinst, .rpm %post).
#
# Creates the system user the service runs as and lets systemd see the new
# units. It enables and starts nothing: the operator declares the agents in
# /etc/continuityd/continuityd.toml, then runs
#   systemctl enable --now continuityd
# An upgrade leaves a running service on the old binary until it restarts.
set -e

case "$1" in
configure | abort-upgrade | abort-deconfigure | abort-remove) ;; # .deb
1 | 2) ;;                                                          # .rpm: install, upgrade
*) exit 0 ;;
esac

# The user, from /usr/lib/sysusers.d/continuityd.conf where sysusers exists.
if [ -z "${DPKG_ROOT:-}" ] && command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers continuityd.conf
elif ! getent passwd continuityd >/dev/null 2>&1; then
	useradd --system --user-group --home-dir /var/lib/continuityd --no-create-home \
		--shell /usr/sbin/nologin --comment "continuityd daemon" continuityd
fi

if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi

# An upgrade (.deb: configure with the old version; .rpm: 2).
if { [ "$1" = configure ] && [ -n "${2:-}" ]; } || [ "$1" = 2 ]; then
	echo "continuityd: a running service keeps the old version until: systemctl try-restart continuityd"
fi
exit 0
