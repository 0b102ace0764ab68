#!/bin/sh
# continuityd package, after removal (.deb postrm, .rpm %postun): let systemd
# forget the removed units. The state in /var/lib/continuityd and the user
# continuityd stay, even on purge: they hold the agents' continuity.
set -e

if [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
exit 0
