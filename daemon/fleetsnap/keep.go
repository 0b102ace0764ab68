package fleetsnap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/daemon/snapshot"
)

// DefaultGrace is retention's grace period (see the package comment): an
// object no manifest names is deleted only once its last put or touch is
// this old, and a Ship names an object only while it is half as old.
const DefaultGrace = time.Hour

// GraceEnv is a test hook: a duration that replaces DefaultGrace, so a
// test sees unreferenced objects collected without waiting an hour.
const GraceEnv = "CONTINUITYD_TEST_FLEET_GRACE"

// HoldEnv is a test hook: "NAME FIFO" holds a Keeper about to delete
// object NAME (it found it unreferenced and old) until the test lets it
// go: it writes FIFO.held, then opens the named pipe FIFO for reading and
// reads it to its end. A test ships the same object from another machine
// meanwhile, on any machine's speed.
const HoldEnv = "CONTINUITYD_TEST_HOLD_FLEET_GC"

// Grace is the grace period: DefaultGrace, or GraceEnv's.
func Grace() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(GraceEnv)); err == nil && d > 0 {
		return d
	}
	return DefaultGrace
}

// holdFromEnv is the hook HoldEnv asks for, or nil.
func holdFromEnv() func(name string) {
	name, fifo, ok := strings.Cut(os.Getenv(HoldEnv), " ")
	if !ok || name == "" || fifo == "" {
		return nil
	}
	var once sync.Once
	return func(at string) {
		if at != name {
			return
		}
		once.Do(func() { holdAt(at, fifo) })
	}
}

// holdAt tells the test it holds at at and waits for it to let go.
func holdAt(at, fifo string) {
	if err := os.WriteFile(fifo+".held", []byte(at), 0o600); err != nil {
		return
	}
	if f, err := os.Open(fifo); err == nil {
		io.Copy(io.Discard, f)
		f.Close()
	}
}

// Keeper applies one agent's retention to the fleet's snapshot bucket,
// run by the daemon that writes the agent: its manifests beyond keep (and
// beyond keepBytes, the newest always kept) are deleted, then every git
// object no manifest of any agent names and not put or touched within
// the grace period. It is not safe for concurrent use.
type Keeper struct {
	bucket    Bucket
	agent     string
	keep      int
	keepBytes int64
	grace     time.Duration
	log       *slog.Logger
	hold      func(name string)
	// refs caches the objects each manifest names, by its name and the
	// time of its record (a manifest is written once).
	refs map[string]manifestRefs
}

type manifestRefs struct {
	at      time.Time // its record's
	snapAt  time.Time // the snapshot's
	objects []string  // object names
}

// NewKeeper keeps agent's snapshots in bucket to keep and keepBytes.
func NewKeeper(bucket Bucket, agent string, keep int, keepBytes int64, log *slog.Logger) *Keeper {
	if log == nil {
		log = slog.Default()
	}
	return &Keeper{bucket: bucket, agent: agent, keep: max(keep, 1), keepBytes: keepBytes, grace: Grace(), log: log,
		hold: holdFromEnv(), refs: map[string]manifestRefs{}}
}

// KeepStats say what one Keep did, and the bucket's size after it.
type KeepStats struct {
	DroppedManifests int
	DeletedObjects   int
	DeletedBytes     int64
	Bucket           capsule.FleetSnapshotBucket
}

// Keep applies retention once. An error leaves the bucket as it was or
// with less deleted; the next Keep goes on.
func (k *Keeper) Keep(ctx context.Context) (KeepStats, error) {
	var ks KeepStats
	// The server's time before the listing: an object put or touched
	// after the listing began is younger than now, so never deleted.
	now, err := k.bucket.ServerTime(ctx)
	if err != nil {
		return ks, fmt.Errorf("fleet snapshot retention: asking the fleet's time: %w", err)
	}
	all, err := k.bucket.ObjectList(ctx, "")
	if err != nil {
		return ks, fmt.Errorf("fleet snapshot retention: listing the bucket: %w", err)
	}
	sizes := map[string]int64{}
	var mine []string
	refs := map[string]manifestRefs{}
	for _, o := range all {
		sizes[o.Name] = o.Size
		agent, ok := manifestAgent(o.Name)
		if !ok {
			continue
		}
		r, err := k.manifest(ctx, agent, o)
		if errors.Is(err, capsule.ErrFleetObjectMissing) {
			continue // deleted since the listing
		}
		if err != nil {
			return ks, err
		}
		refs[o.Name] = r
		if agent == k.agent {
			mine = append(mine, o.Name)
		}
	}
	k.refs = refs // forget the manifests gone
	for _, name := range k.beyond(mine, refs, sizes) {
		if err := k.deleteNow(ctx, name); err != nil {
			return ks, fmt.Errorf("fleet snapshot retention: deleting the manifest %s: %w", name, err)
		}
		delete(refs, name)
		ks.DroppedManifests++
	}
	named := map[string]bool{}
	for _, r := range refs {
		for _, o := range r.objects {
			named[o] = true
		}
	}
	old := now.Add(-k.grace)
	for _, o := range all {
		if !strings.HasPrefix(o.Name, "git/") || named[o.Name] || !o.At.Before(old) {
			continue
		}
		deleted, err := k.deleteIfOld(ctx, o.Name, old)
		if err != nil {
			return ks, fmt.Errorf("fleet snapshot retention: deleting %s: %w", o.Name, err)
		}
		if deleted {
			ks.DeletedObjects++
			ks.DeletedBytes += o.Size
			delete(sizes, o.Name)
		}
	}
	ks.Bucket = capsule.FleetSnapshotBucket{Manifests: len(refs)}
	for name, size := range sizes {
		if strings.HasPrefix(name, "snap/") && refs[name].objects == nil {
			continue // dropped
		}
		ks.Bucket.Bytes += size
		if strings.HasPrefix(name, "git/") {
			ks.Bucket.Objects++
		}
	}
	if ks.DroppedManifests > 0 || ks.DeletedObjects > 0 {
		k.log.Info("fleet snapshot retention", "agent", k.agent, "dropped_snapshots", ks.DroppedManifests,
			"deleted_objects", ks.DeletedObjects, "deleted_bytes", ks.DeletedBytes, "keep", k.keep, "keep_bytes", k.keepBytes,
			"bucket_bytes", ks.Bucket.Bytes, "bucket_objects", ks.Bucket.Objects, "bucket_snapshots", ks.Bucket.Manifests)
	}
	return ks, nil
}

// manifestAgent is the agent of manifest name "snap/AGENT/ID".
func manifestAgent(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "snap/")
	if !ok {
		return "", false
	}
	agent, id, ok := strings.Cut(rest, "/")
	return agent, ok && agent != "" && id != ""
}

// manifest is what manifest o names, read once. A manifest that is not
// one (damaged, forged) names nothing: no restore can use it either.
func (k *Keeper) manifest(ctx context.Context, agent string, o capsule.FleetObject) (manifestRefs, error) {
	if r, ok := k.refs[o.Name]; ok && r.at.Equal(o.At) {
		return r, nil
	}
	m, err := readManifest(ctx, k.bucket, agent, o.Name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return manifestRefs{}, err
	}
	r := manifestRefs{at: o.At, objects: []string{}}
	if err != nil {
		var ce *capsule.Error
		if !errors.Is(err, snapshot.ErrDamaged) && !errors.Is(err, capsule.ErrFleetObjectDamaged) && !errors.As(err, &ce) {
			return manifestRefs{}, fmt.Errorf("fleet snapshot retention: reading the manifest %s: %w", o.Name, err)
		}
		k.log.Warn("fleet snapshot retention: a manifest in the bucket is not valid; it keeps no object", "manifest", o.Name, "err", err)
		return r, nil
	}
	r.snapAt = m.At
	for _, ob := range m.Objects {
		r.objects = append(r.objects, objectName(ob.ID))
	}
	return r, nil
}

// beyond are the manifests of mine past keep, then past keepBytes (the
// bytes of the objects the kept ones name, each counted once), oldest
// snapshots first to go; the newest is always kept.
func (k *Keeper) beyond(mine []string, refs map[string]manifestRefs, sizes map[string]int64) []string {
	slices.SortFunc(mine, func(a, b string) int {
		return cmp.Or(refs[b].snapAt.Compare(refs[a].snapAt), strings.Compare(b, a))
	})
	counted := map[string]bool{}
	var bytes int64
	for i, name := range mine {
		if i >= k.keep {
			return mine[i:]
		}
		add := sizes[name]
		for _, o := range refs[name].objects {
			if !counted[o] {
				add += sizes[o]
			}
		}
		if i > 0 && k.keepBytes > 0 && bytes+add > k.keepBytes {
			return mine[i:]
		}
		bytes += add
		for _, o := range refs[name].objects {
			counted[o] = true
		}
	}
	return nil
}

// deleteNow deletes name as it is now (a manifest: retention decided).
func (k *Keeper) deleteNow(ctx context.Context, name string) error {
	ob, err := k.bucket.StatObject(ctx, name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	return k.bucket.DeleteObject(ctx, ob)
}

// deleteIfOld deletes object name if its record is still older than old
// when the delete lands: a machine that touched or sent it since wants
// it, and keeps it.
func (k *Keeper) deleteIfOld(ctx context.Context, name string, old time.Time) (bool, error) {
	if k.hold != nil {
		k.hold(name)
	}
	ob, err := k.bucket.StatObject(ctx, name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !ob.At.Before(old) {
		return false, nil
	}
	err = k.bucket.DeleteObject(ctx, ob)
	if errors.Is(err, capsule.ErrFleetObjectChanged) {
		return false, nil
	}
	return err == nil, err
}
