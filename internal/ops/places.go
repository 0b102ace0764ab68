package ops

import "time"

// PlaceStatus is one adopted place in StatusAnswer: its name (the agent
// name to give --agent), its directory, and whether it is watched now (a
// place idle for [places] idle_after is not, its state kept).
type PlaceStatus struct {
	Name        string     `json:"name"`
	Workdir     string     `json:"workdir"`
	Watched     bool       `json:"watched"`
	Adopted     time.Time  `json:"adopted"`
	LastSession *time.Time `json:"last_session,omitempty"`
}

// PlaceMove is state that went to another name: an adopted place
// configured by name, an agent renamed, state of an earlier version.
type PlaceMove struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Workdir string    `json:"workdir"`
	At      time.Time `json:"at"`
}

// WatchUse is the inotify watches the daemon's watchers hold and the
// system's limit for the user (0: not known, as off Linux).
type WatchUse struct {
	InUse int `json:"in_use"`
	Limit int `json:"limit,omitempty"`
}
