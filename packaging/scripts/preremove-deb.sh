#!/bin/sh
# continuityd .deb, before removal (prerm): stop the system service when the
# package is removed, not when it is upgraded. Per-user instances are their
# users' to stop. The state in /var/lib/continuityd stays.
set -e

if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	deb-systemd-invoke stop continuityd.service >/dev/null || true
fi
exit 0
