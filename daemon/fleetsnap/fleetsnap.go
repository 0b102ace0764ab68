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
//
// # Retention
//
// The daemon that writes an agent keeps its snapshots in the bucket to
// the same bounds as on its disk ([snapshots] keep and keep_bytes): a
// Keeper deletes the agent's manifests beyond them, then the git objects
// that no manifest of any agent names. Another machine may be shipping a
// snapshot that names such an object at that very moment (it found the
// object there and did not send it again), so an object is deleted only
// when all of this holds, with every time the fleet server's (the
// machines' clocks need not agree) and G the grace period (an hour):
//
//  1. the Keeper read the server's time T, then listed the bucket, and
//     no manifest in that listing names the object;
//  2. the object's record (its last put or touch) is older than T - G;
//  3. the delete is a compare-and-set on that record: it lands only if
//     nothing put or touched the object since the Keeper looked.
//
// A Ship, for its part, names in a manifest only objects whose record is
// younger than S - G/2 (S: the server's time when it began looking; an
// older one it touches, a compare-and-set too, or sends again), and
// writes the manifest before S + G/4 (else it looks again). Say the
// manifest lands at C, after the listing began (else 1 fails), so after
// T. An object it names was put or touched at A >= S - G/2 > C - 3G/4 >
// T - G: if the Keeper saw that record, 2 fails; if it saw an older one,
// 3 fails (the touch came between) or the touch failed and the Ship sent
// the object again. Either way the object stays.
//
// # Trust
//
// Nothing secret is shipped (withhold.go): credential files and files the
// secret guard flags stay on the machine, and the snapshot ships as a copy
// of its commit without them. What comes from the fleet is untrusted: a
// manifest is read within a bound and checked against its name, each
// object is streamed to disk within the receiving store's max_file_size
// and checked against its hash, and the snapshot's ref is made only once
// every object it reaches is there; what fails is FLEET_SNAPSHOT_DAMAGED
// and nothing of it is kept.
package fleetsnap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
)

// Bucket is the fleet's object store as this package uses it (a fleet
// upstream's client implements it). OpenObject returns an error wrapping
// capsule.ErrFleetObjectMissing for a name the bucket lacks, and a reader
// whose errors wrap capsule.ErrFleetObjectDamaged when the content belies
// the bucket's digest.
type Bucket interface {
	HasObject(ctx context.Context, name string) (bool, error)
	PutObject(ctx context.Context, name string, data []byte) error
	OpenObject(ctx context.Context, name string) (io.ReadCloser, int64, error)
	ListObjects(ctx context.Context, prefix string) ([]string, error)

	// What retention (keep.go) and a Ship that names an object it did
	// not send need: the server's clock; an object's record (its
	// position and the server's time of its last put or touch;
	// capsule.ErrFleetObjectMissing when absent); a listing with sizes;
	// and a touch and a delete that take effect only while the record is
	// the one looked at (else capsule.ErrFleetObjectChanged).
	ServerTime(ctx context.Context) (time.Time, error)
	StatObject(ctx context.Context, name string) (capsule.FleetObject, error)
	ObjectList(ctx context.Context, prefix string) ([]capsule.FleetObject, error)
	TouchObject(ctx context.Context, o capsule.FleetObject) error
	DeleteObject(ctx context.Context, o capsule.FleetObject) error
}

// Store is the agent's snapshot store as this package uses it:
// *snapshot.Store in process, or the store in the owner's worker
// (asowner.Store) when the daemon runs as root over another user's tree.
type Store interface {
	Objects(ctx context.Context, id string) (snapshot.Snapshot, []snapshot.Object, error)
	ReadObjects(ctx context.Context, ids []string, fn func(o snapshot.Object, data []byte) error) error
	HoldObjects() (release func())
	Missing(ctx context.Context, ids []string) ([]string, error)
	ReceiveObject(ctx context.Context, o snapshot.Object, size int64, r io.Reader) error
	Import(ctx context.Context, id, commit string) (snapshot.Snapshot, error)
}

// Manifest is one snapshot in the bucket.
type Manifest struct {
	V       int    `json:"v"`
	Agent   string `json:"agent"`
	Machine string `json:"machine"`
	ID      string `json:"id"`
	// Commit is the commit shipped for the snapshot: ID, or a copy of it
	// whose tree leaves out the files Withheld names. "" means ID.
	Commit   string            `json:"commit,omitempty"`
	Tree     string            `json:"tree"`
	At       time.Time         `json:"at"`
	Trigger  string            `json:"trigger"`
	Seq      uint64            `json:"seq"`
	Parent   string            `json:"parent,omitempty"`
	Files    int               `json:"files"` // changed against its parent
	Objects  []snapshot.Object `json:"objects"`
	Uploaded time.Time         `json:"uploaded"`
	// Withheld are the files kept off the fleet (credentials), and why.
	Withheld []snapshot.Withheld `json:"withheld,omitempty"`
}

// commit is the commit shipped for the snapshot.
func (m Manifest) commit() string {
	if m.Commit != "" {
		return m.Commit
	}
	return m.ID
}

func objectName(id string) string          { return "git/" + id }
func manifestName(agent, id string) string { return "snap/" + agent + "/" + id }

// maxKnown bounds the names a Shipper remembers; past it, it forgets them
// all and asks the bucket again.
const maxKnown = 1 << 20

// Shipper sends one agent's snapshots to the bucket. It is not safe for
// concurrent use: the agent runs one Ship at a time.
type Shipper struct {
	store    Store
	bucket   Bucket
	withhold *Withholder
	agent    string
	machine  string
	log      *slog.Logger
	known    map[string]time.Time // names seen in the bucket: when they were put or touched
	grace    time.Duration        // retention's (Grace)
}

// NewShipper ships agent's snapshots from store to bucket, without the
// files withhold keeps on the machine.
func NewShipper(store Store, bucket Bucket, withhold *Withholder, agent, machine string, log *slog.Logger) *Shipper {
	if log == nil {
		log = slog.Default()
	}
	return &Shipper{store: store, bucket: bucket, withhold: withhold, agent: agent, machine: machine, log: log, known: map[string]time.Time{}, grace: Grace()}
}

// Stats say what one Ship did.
type Stats struct {
	Objects  int                 // the snapshot's objects (as shipped)
	Sent     int                 // objects the bucket lacked, sent now
	Bytes    int64               // their size
	Already  bool                // the manifest was there: nothing was sent
	Withheld []snapshot.Withheld // files kept on the machine, and why
}

// Ship sends snapshot id: the objects the bucket lacks, then its manifest.
// Files the Withholder keeps on the machine are left out: the snapshot
// ships as a copy of its commit without them, and the manifest names
// them. A failure leaves what was sent (each object is whole or absent)
// and is retried by the next Ship.
//
// Retention (keep.go) may delete an object no manifest names while this
// runs; what makes the manifest safe is in the package comment: every
// object it names was put or touched within half the grace period, and
// the manifest is written within a quarter of it after the objects were
// looked at (or they are looked at again).
func (s *Shipper) Ship(ctx context.Context, id string) (Stats, error) {
	snap, objs, err := s.store.Objects(ctx, id)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	mname := manifestName(s.agent, snap.ID)
	if _, ok := s.known[mname]; !ok {
		// A manifest is written after its objects: when it is there (a
		// restarted daemon, a snapshot shipped before), so are they.
		has, err := s.bucket.HasObject(ctx, mname)
		if err != nil {
			return st, fmt.Errorf("fleet snapshots: looking up %s: %w", mname, err)
		}
		if has {
			s.remember(mname, time.Time{})
		}
	}
	if _, ok := s.known[mname]; ok {
		st.Already = true
		return st, nil
	}
	sh, err := s.withhold.plan(ctx, s.store, objs)
	if err != nil {
		return st, err
	}
	st.Objects, st.Withheld = len(sh.objects), sh.withheld
	window := s.grace / 4
	for pass := 1; ; pass++ {
		start := time.Now()
		now, err := s.bucket.ServerTime(ctx)
		if err != nil {
			return st, fmt.Errorf("fleet snapshots: asking the fleet's time: %w", err)
		}
		if err := s.send(ctx, &st, sh, now); err != nil {
			return st, err
		}
		if time.Since(start) < window {
			mctx, cancel := context.WithDeadline(ctx, start.Add(window))
			err := s.putManifest(mctx, snap, sh, mname)
			cancel()
			if err != nil {
				return st, err
			}
			break
		}
		// Too slow to name what was looked at: look again (what was sent
		// is fresh now, so the next pass is quick).
		if pass == maxPasses {
			return st, fmt.Errorf("fleet snapshots: sending the objects of %s took over %s %d times; retried after the next snapshot", short(snap.ID), window, pass)
		}
	}
	if len(sh.withheld) > 0 {
		s.log.Info("work snapshot shipped to the fleet without the files that stay on this machine",
			"snapshot", snap.ID, "withheld", len(sh.withheld), "files", withheldText(sh.withheld, maxLoggedWithheld))
	}
	return st, nil
}

// maxPasses bounds the looks at a snapshot's objects one Ship makes.
const maxPasses = 3

// send makes every object of sh present in the bucket and fresh: put or
// touched since the server's time now less half the grace period.
func (s *Shipper) send(ctx context.Context, st *Stats, sh shipment, now time.Time) error {
	fresh := now.Add(-s.grace / 2)
	var need []string
	for _, o := range sh.objects {
		name := objectName(o.ID)
		if at, ok := s.known[name]; ok && !at.Before(fresh) {
			continue
		}
		there, err := s.present(ctx, name, fresh, now)
		if err != nil {
			return err
		}
		if there {
			continue
		}
		if data, ok := sh.made[o.ID]; ok {
			if err := s.put(ctx, st, o, data, now); err != nil {
				return err
			}
			continue
		}
		need = append(need, o.ID)
	}
	if len(need) == 0 {
		return nil
	}
	return s.store.ReadObjects(ctx, need, func(o snapshot.Object, data []byte) error { return s.put(ctx, st, o, data, now) })
}

// present reports whether the bucket holds name fresh, touching it when
// it is older than fresh; false: it must be sent (absent, or deleted or
// replaced while it was touched).
func (s *Shipper) present(ctx context.Context, name string, fresh, now time.Time) (bool, error) {
	ob, err := s.bucket.StatObject(ctx, name)
	switch {
	case errors.Is(err, capsule.ErrFleetObjectMissing):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("fleet snapshots: looking up %s: %w", name, err)
	case !ob.At.Before(fresh):
		s.remember(name, ob.At)
		return true, nil
	}
	err = s.bucket.TouchObject(ctx, ob)
	switch {
	case err == nil:
		s.remember(name, now)
		return true, nil
	case errors.Is(err, capsule.ErrFleetObjectChanged):
		return false, nil
	}
	return false, fmt.Errorf("fleet snapshots: touching %s: %w", name, err)
}

// putManifest writes snapshot snap's manifest, naming sh's objects.
func (s *Shipper) putManifest(ctx context.Context, snap snapshot.Snapshot, sh shipment, mname string) error {
	m := Manifest{V: 1, Agent: s.agent, Machine: s.machine, ID: snap.ID, Tree: sh.objects[1].ID, At: snap.Time,
		Trigger: snap.Trigger, Seq: snap.Seq, Parent: snap.Parent, Files: snap.Files(), Objects: sh.objects,
		Uploaded: time.Now().UTC(), Withheld: sh.withheld}
	if sh.commit != snap.ID {
		m.Commit = sh.commit
	}
	doc, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.bucket.PutObject(ctx, mname, doc); err != nil {
		return fmt.Errorf("fleet snapshots: sending the manifest %s: %w", mname, err)
	}
	s.remember(mname, time.Time{})
	return nil
}

// put sends one object; now is the server's time before it was sent.
func (s *Shipper) put(ctx context.Context, st *Stats, o snapshot.Object, data []byte, now time.Time) error {
	name := objectName(o.ID)
	if err := s.bucket.PutObject(ctx, name, data); err != nil {
		return fmt.Errorf("fleet snapshots: sending %s: %w", name, err)
	}
	s.remember(name, now)
	st.Sent++
	st.Bytes += int64(len(data))
	return nil
}

// maxLoggedWithheld bounds the withheld files one log line names.
const maxLoggedWithheld = 20

// withheldText names up to max withheld files with their reasons.
func withheldText(list []snapshot.Withheld, max int) string {
	var b strings.Builder
	for i, w := range list {
		if i == max {
			fmt.Fprintf(&b, "; and %d more", len(list)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q: %s", w.Path, w.Reason)
	}
	return b.String()
}

// remember notes name in the bucket, put or touched at the server's time
// at (zero for a manifest).
func (s *Shipper) remember(name string, at time.Time) {
	if len(s.known) >= maxKnown {
		clear(s.known)
	}
	s.known[name] = at
}

// Fetch brings snapshot id (a full id or a unique prefix of 7+
// characters) of agent from the bucket into store: the objects the store
// lacks, each streamed to disk and checked against its hash and the
// store's size limit as it arrives, then the snapshot's ref once every
// object it reaches is there. A snapshot the bucket lacks is a
// *capsule.Error NOT_FOUND; one that is damaged or forged (a bad
// manifest, an object missing, misnamed or too large) is
// FLEET_SNAPSHOT_DAMAGED, and nothing of it is imported.
func Fetch(ctx context.Context, store Store, bucket Bucket, agent, id string) (snapshot.Snapshot, error) {
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
	m, err := readManifest(ctx, bucket, agent, name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return snapshot.Snapshot{}, notFound(agent, id)
	}
	if err != nil {
		return snapshot.Snapshot{}, damaged(agent, id, err)
	}
	types := make(map[string]string, len(m.Objects))
	ids := make([]string, len(m.Objects))
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
		if err := receive(ctx, store, bucket, snapshot.Object{ID: oid, Type: types[oid]}); err != nil {
			return snapshot.Snapshot{}, damaged(agent, m.ID, fmt.Errorf("object %s: %w", oid, err))
		}
	}
	snap, err := store.Import(ctx, m.ID, m.commit())
	return snap, damaged(agent, m.ID, err)
}

// maxManifestBytes bounds a manifest read from the bucket: a snapshot of
// 200,000 files lists about 15 MiB of objects.
const maxManifestBytes = 64 << 20

// readManifest reads and checks the manifest name of agent's snapshot.
func readManifest(ctx context.Context, bucket Bucket, agent, name string) (Manifest, error) {
	rc, size, err := bucket.OpenObject(ctx, name)
	if err != nil {
		return Manifest{}, err
	}
	defer rc.Close()
	if size > maxManifestBytes {
		return Manifest{}, fmt.Errorf("the manifest %s is %d bytes, over %d: %w", name, size, maxManifestBytes, snapshot.ErrDamaged)
	}
	doc, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("reading the manifest %s: %w", name, err)
	}
	var m Manifest
	if err := json.Unmarshal(doc, &m); err != nil {
		return Manifest{}, fmt.Errorf("the manifest %s is not valid (%v): %w", name, err, snapshot.ErrDamaged)
	}
	if m.Agent != agent || manifestName(agent, m.ID) != name || len(m.Objects) < 2 ||
		m.Objects[0].ID != m.commit() || m.Objects[0].Type != "commit" {
		return Manifest{}, fmt.Errorf("the manifest %s does not describe snapshot %s of agent %s: %w", name, m.ID, agent, snapshot.ErrDamaged)
	}
	for _, o := range m.Objects {
		switch o.Type {
		case "commit", "tree", "blob":
		default:
			return Manifest{}, fmt.Errorf("the manifest %s lists object %s of type %q: %w", name, o.ID, o.Type, snapshot.ErrDamaged)
		}
	}
	return m, nil
}

// receive streams one object from the bucket into the store.
func receive(ctx context.Context, store Store, bucket Bucket, o snapshot.Object) error {
	rc, size, err := bucket.OpenObject(ctx, objectName(o.ID))
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return fmt.Errorf("the manifest lists it and the bucket lacks it: %w", snapshot.ErrDamaged)
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	return store.ReceiveObject(ctx, o, size, rc)
}

// damaged names err a FLEET_SNAPSHOT_DAMAGED refusal when it says what
// came from the fleet is not what it claims (a retry will not help); any
// other error is returned as it is.
func damaged(agent, id string, err error) error {
	if err == nil || !(errors.Is(err, snapshot.ErrDamaged) || errors.Is(err, capsule.ErrFleetObjectDamaged)) {
		return err
	}
	return capsule.Refuse(capsule.CodeFleetSnapshotDamaged, "id",
		"snapshot %s of agent %s in the fleet is damaged or forged, and nothing of it was kept: %v", short(id), agent, err)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func notFound(agent, id string) error {
	return capsule.Refuse(capsule.CodeNotFound, "id",
		"no snapshot %s here nor in the fleet for agent %s: it never existed or retention dropped it; `continuityd snapshot list` shows those kept", id, agent)
}
