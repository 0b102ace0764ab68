package capture

import (
	"testing"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/snapshot"
)

// TestSnapshotDefaultsAreTheConfigurations: the snapshot store's defaults
// (its own, so it needs no config) equal the configuration's.
func TestSnapshotDefaultsAreTheConfigurations(t *testing.T) {
	if snapshot.DefaultMaxFileBytes != config.DefaultSnapshotMaxFileSize ||
		snapshot.DefaultKeepCount != config.DefaultSnapshotKeep ||
		snapshot.DefaultKeepBytes != config.DefaultSnapshotKeepBytes {
		t.Fatalf("snapshot defaults %d/%d/%d, configuration's %d/%d/%d",
			snapshot.DefaultMaxFileBytes, snapshot.DefaultKeepCount, snapshot.DefaultKeepBytes,
			config.DefaultSnapshotMaxFileSize, config.DefaultSnapshotKeep, config.DefaultSnapshotKeepBytes)
	}
}
