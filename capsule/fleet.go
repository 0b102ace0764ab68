package capsule

import "time"

// RestoredFrom says where an agent's state came from when its local state
// was empty and a fleet upstream held it (resume "restored_from").
type RestoredFrom struct {
	Upstream   string    `json:"upstream"`
	Machine    string    `json:"machine"`            // the daemon that last wrote it
	Instance   string    `json:"instance,omitempty"` // that daemon's state directory, hashed
	At         time.Time `json:"at"`                 // when it wrote the state
	AgeSeconds int64     `json:"age_seconds"`        // how old the state was when restored
	Revision   uint64    `json:"revision"`
	Seq        uint64    `json:"seq"`      // the log seq the state included
	LastSeq    uint64    `json:"last_seq"` // the fleet's last write; new writes follow it
	Replayed   int       `json:"replayed"` // writes after the state, replayed
	// Merged is set when the fleet came back after local writes were made:
	// they were kept, and the fleet filled in only what they had not set.
	Merged     bool      `json:"merged,omitempty"`
	RestoredAt time.Time `json:"restored_at"`
	// PreviousWriterRecent is set when another daemon wrote the state
	// within the conflict window: it may still be running.
	PreviousWriterRecent bool `json:"previous_writer_recent,omitempty"`
}

// FleetConflict is another daemon seen writing the same agent through a
// fleet upstream (resume and status "fleet_conflict"). Neither overwrites
// the other's state: Held says whose state the fleet's agent key holds.
type FleetConflict struct {
	Upstream string    `json:"upstream"`
	Machine  string    `json:"machine"`
	Instance string    `json:"instance,omitempty"`
	Held     bool      `json:"held"` // true: this daemon's state is the fleet's
	Seq      uint64    `json:"seq"`  // the other writer's latest seq
	At       time.Time `json:"at"`   // its latest sign of life
}
