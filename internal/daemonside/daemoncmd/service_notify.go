package daemoncmd

import (
	"fmt"
	"os"

	sdaemon "github.com/coreos/go-systemd/v22/daemon"
)

// notifyReady tells systemd that the daemon is ready (Type=notify units):
// daemon.Options.Ready calls it once the socket listens. Without
// $NOTIFY_SOCKET (not started by systemd) it does nothing.
func notifyReady() {
	sdNotify(sdaemon.SdNotifyReady + "\nSTATUS=serving the local API")
}

// notifyStopping tells systemd that the daemon is shutting down, so that
// `systemctl status` shows it deactivating while in-flight work finishes.
func notifyStopping() {
	sdNotify(sdaemon.SdNotifyStopping + "\nSTATUS=shutting down")
}

func sdNotify(state string) {
	// The environment is kept: STOPPING=1 follows READY=1 on the same socket.
	if _, err := sdaemon.SdNotify(false, state); err != nil {
		// systemd would wait for READY=1 until its start timeout: say why.
		fmt.Fprintf(os.Stderr, "continuityd: cannot notify systemd (%s): %v\n", os.Getenv("NOTIFY_SOCKET"), err)
	}
}
