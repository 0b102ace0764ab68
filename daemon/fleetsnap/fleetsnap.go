// Package fleetsnap carries work snapshots between machines through the
// fleet's object store (a nats upstream with `snapshots = true`), so
// `continuityd snapshot restore ID` works on a machine that never took
// snapshot ID.
//
// # What goes where
//
// A snapshot is git objects (daemon/snapshot): its commit, its trees and
// its blobs. Each is stored once in the bucket under "git/HASH", its
// content exactly as git hashes it, so an unchanged file is sent once for
// every snapshot and every agent of the fleet, and a receiver checks each
// object against its name. A small JSON manifest per snapshot,
// "snap/AGENT/ID", names the snapshot's metadata and its objects; it is
// written after the objects, so a manifest in the bucket means its objects
// are there.
//
// # Cost
//
// A Shipper remembers the names it has seen in the bucket, so after the
// first snapshot only the changed files and the trees above them are
// looked up and sent; a snapshot whose manifest is there already (a
// restarted daemon) costs one lookup. Fetch asks the store which objects it lacks and
// reads only those.
package fleetsnap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
	fleet "github.com/continuityd/continuityd/upstream/nats"
)

// Bucket is the fleet's object store as the nats upstream's client gives
// it. GetObject returns an error wrapping fleet.ErrNoObject for a name the
// bucket lacks.
type Bucket interface {
	HasObject(ctx context.Context, name string) (bool, error)
	PutObject(ctx context.Context, name string, data []byte) error
	GetObject(ctx context.Context, name string) ([]byte, error)
	ListObjects(ctx context.Context, prefix string) ([]string, error)
}

var _ Bucket = (*fleet.Client)(nil)

// Manifest is one snapshot in the bucket.
type Manifest struct {
	V        int               `json:"v"`
	Agent    string            `json:"agent"`
	Machine  string            `json:"machine"`
	ID       string            `json:"id"`
	Tree     string            `json:"tree"`
	At       time.Time         `json:"at"`
	Trigger  string            `json:"trigger"`
	Seq      uint64            `json:"seq"`
	Parent   string            `json:"parent,omitempty"`
	Files    int               `json:"files"` // changed against its parent
	Objects  []snapshot.Object `json:"objects"`
	Uploaded time.Time         `json:"uploaded"`
}

func objectName(id string) string          { return "git/" + id }
func manifestName(agent, id string) string { return "snap/" + agent + "/" + id }

// maxKnown bounds the names a Shipper remembers; past it, it forgets them
// all and asks the bucket again.
const maxKnown = 1 << 20

// Shipper sends one agent's snapshots to the bucket. It is not safe for
// concurrent use: the agent runs one Ship at a time.
type Shipper struct {
	store   *snapshot.Store
	bucket  Bucket
	agent   string
	machine string
	log     *slog.Logger
	known   map[string]bool // object names seen in the bucket
}

// NewShipper ships agent's snapshots from store to bucket.
func NewShipper(store *snapshot.Store, bucket Bucket, agent, machine string, log *slog.Logger) *Shipper {
	if log == nil {
		log = slog.Default()
	}
	return &Shipper{store: store, bucket: bucket, agent: agent, machine: machine, log: log, known: map[string]bool{}}
}

// Stats say what one Ship did.
type Stats struct {
	Objects int   // the snapshot's objects
	Sent    int   // objects the bucket lacked, sent now
	Bytes   int64 // their size
	Already bool  // the manifest was there: nothing was sent
}

// Ship sends snapshot id: the objects the bucket lacks, then its manifest.
// A failure leaves what was sent (each object is whole or absent) and is
// retried by the next Ship.
func (s *Shipper) Ship(ctx context.Context, id string) (Stats, error) {
	snap, objs, err := s.store.Objects(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{Objects: len(objs)}
	mname := manifestName(s.agent, snap.ID)
	if !s.known[mname] {
		// A manifest is written after its objects: when it is there (a
		// restarted daemon, a snapshot shipped before), so are they.
		has, err := s.bucket.HasObject(ctx, mname)
		if err != nil {
			return st, fmt.Errorf("fleet snapshots: looking up %s: %w", mname, err)
		}
		if has {
			for _, o := range objs {
				s.remember(objectName(o.ID))
			}
			s.remember(mname)
		}
	}
	if s.known[mname] {
		st.Already = true
		return st, nil
	}
	var need []string
	for _, o := range objs {
		name := objectName(o.ID)
		if s.known[name] {
			continue
		}
		has, err := s.bucket.HasObject(ctx, name)
		if err != nil {
			return st, fmt.Errorf("fleet snapshots: looking up %s: %w", name, err)
		}
		if has {
			s.remember(name)
			continue
		}
		need = append(need, o.ID)
	}
	if len(need) > 0 {
		err = s.store.ReadObjects(ctx, need, func(o snapshot.Object, data []byte) error {
			name := objectName(o.ID)
			if err := s.bucket.PutObject(ctx, name, data); err != nil {
				return fmt.Errorf("fleet snapshots: sending %s: %w", name, err)
			}
			s.remember(name)
			st.Sent++
			st.Bytes += int64(len(data))
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	m := Manifest{V: 1, Agent: s.agent, Machine: s.machine, ID: snap.ID, Tree: objs[1].ID, At: snap.Time,
		Trigger: snap.Trigger, Seq: snap.Seq, Parent: snap.Parent, Files: snap.Files(), Objects: objs, Uploaded: time.Now().UTC()}
	doc, err := json.Marshal(m)
	if err != nil {
		return st, err
	}
	if err := s.bucket.PutObject(ctx, mname, doc); err != nil {
		return st, fmt.Errorf("fleet snapshots: sending the manifest %s: %w", mname, err)
	}
	s.remember(mname)
	return st, nil
}

func (s *Shipper) remember(name string) {
	if len(s.known) >= maxKnown {
		clear(s.known)
	}
	s.known[name] = true
}

// Fetch brings snapshot id (a full id or a unique prefix of 7+
// characters) of agent from the bucket into store: the objects the store
// lacks, each checked against its hash, then the snapshot's ref. A
// snapshot the bucket lacks is a *capsule.Error NOT_FOUND.
func Fetch(ctx context.Context, store *snapshot.Store, bucket Bucket, agent, id string) (snapshot.Snapshot, error) {
	id, err := snapshot.CheckID(id, "id")
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	name := manifestName(agent, id)
	if len(id) < 40 {
		names, err := bucket.ListObjects(ctx, name)
		if err != nil {
			return snapshot.Snapshot{}, fmt.Errorf("fleet snapshots: listing %s: %w", name, err)
		}
		switch len(names) {
		case 0:
			return snapshot.Snapshot{}, notFound(agent, id)
		case 1:
			name = names[0]
		default:
			return snapshot.Snapshot{}, capsule.Refuse(capsule.CodeInvalidField, "id",
				"%s names %d snapshots in the fleet; give more of the id", id, len(names))
		}
	}
	doc, err := bucket.GetObject(ctx, name)
	if errors.Is(err, fleet.ErrNoObject) {
		return snapshot.Snapshot{}, notFound(agent, id)
	}
	if err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("fleet snapshots: reading %s: %w", name, err)
	}
	var m Manifest
	if err := json.Unmarshal(doc, &m); err != nil {
		return snapshot.Snapshot{}, fmt.Errorf("fleet snapshots: the manifest %s is not valid: %w", name, err)
	}
	if m.Agent != agent || manifestName(agent, m.ID) != name || len(m.Objects) < 2 || m.Objects[0].ID != m.ID || m.Objects[0].Type != "commit" {
		return snapshot.Snapshot{}, fmt.Errorf("fleet snapshots: the manifest %s does not describe snapshot %s of agent %s", name, m.ID, agent)
	}
	ids := make([]string, len(m.Objects))
	types := make(map[string]string, len(m.Objects))
	for i, o := range m.Objects {
		ids[i] = o.ID
		types[o.ID] = o.Type
	}
	// Held before the objects are counted: objects an earlier fetch left
	// unreferenced must not be pruned between the count and the import.
	release := store.HoldObjects()
	defer release()
	missing, err := store.Missing(ctx, ids)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	for _, oid := range missing {
		data, err := bucket.GetObject(ctx, objectName(oid))
		if err != nil {
			return snapshot.Snapshot{}, fmt.Errorf("fleet snapshots: reading object %s of snapshot %s: %w", oid, m.ID[:12], err)
		}
		if err := store.WriteObject(ctx, snapshot.Object{ID: oid, Type: types[oid]}, data); err != nil {
			return snapshot.Snapshot{}, err
		}
	}
	return store.Import(ctx, m.ID)
}

func notFound(agent, id string) error {
	return capsule.Refuse(capsule.CodeNotFound, "id",
		"no snapshot %s here nor in the fleet for agent %s: it never existed or retention dropped it; `continuityd snapshot list` shows those kept", id, agent)
}
