#!/bin/sh
# continuityd .rpm, before removal (%preun): stop and disable the system
# service when the package is removed ($1 = 0), not when it is upgraded.
# Per-user instances are their users' to stop. The state in
# /var/lib/continuityd stays.
set -e

if [ "$1" = 0 ] && [ -d /run/systemd/system ]; then
	systemctl --no-reload disable --now continuityd.service >/dev/null 2>&1 || true
fi
exit 0
