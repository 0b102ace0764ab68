package agent

import (
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

// A resume takes the ready answer only when all withLocal set has a slot
// in it: anything else (here the fields withLocal sets today without a
// slot) sends it to the full path.
func TestLocalOnly(t *testing.T) {
	slots := capsule.Resume{
		Snapshot:  &capsule.SnapshotRef{ID: "s1"},
		Upstreams: []capsule.UpstreamState{{Name: "local"}},
		Degraded:  []string{"fleet"},
		Conflicts: []capsule.PathConflict{},
	}
	slots.SinceLastVisit.ByOthers = []capsule.ByOther{{Path: "a.go", By: "person"}}
	if !localOnly(&slots) {
		t.Fatal("a resume with only the slots' values set takes the full path")
	}
	for name, set := range map[string]func(*capsule.Resume){
		"work_lost":           func(r *capsule.Resume) { r.WorkLost = []capsule.WorkLost{{}} },
		"fleet_handover":      func(r *capsule.Resume) { r.FleetHandover = &capsule.FleetHandover{} },
		"fleet_conflict":      func(r *capsule.Resume) { r.FleetConflict = []capsule.FleetConflict{{}} },
		"restored_from":       func(r *capsule.Resume) { r.RestoredFrom = &capsule.RestoredFrom{} },
		"restore_interrupted": func(r *capsule.Resume) { r.RestoreInterrupted = &capsule.RestoreInterrupted{} },
	} {
		r := slots
		set(&r)
		if localOnly(&r) {
			t.Errorf("a resume with %s set takes the ready answer, which has no slot for it", name)
		}
	}
}
