package nats

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
)

// Work snapshots across machines (the upstream's `snapshots = true`): the
// snapshots' git objects and manifests go to the object store
// BUCKET-snapshots ("continuityd-snapshots" by default), created when
// missing with Options.Replicas replicas and never changed when present.
// What goes under which name is daemon/fleetsnap's business; this client
// only stores, reads and lists named objects.

// SnapshotBucketSuffix follows Bucket in the object store's name.
const SnapshotBucketSuffix = "-snapshots"

// SnapshotBucket names the object store that holds work snapshots.
func (c *Client) SnapshotBucket() string { return c.o.Bucket + SnapshotBucketSuffix }

// objects finds (or creates) the snapshot object store once; after an
// error it tries again at the next call.
func (c *Client) objects(ctx context.Context) (jetstream.ObjectStore, error) {
	c.ensureMu.Lock()
	defer c.ensureMu.Unlock()
	if c.obj != nil {
		return c.obj, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	name := c.SnapshotBucket()
	obj, err := c.js.ObjectStore(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		obj, err = c.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      name,
			Description: "continuityd: work snapshots' git objects (by hash) and manifests",
			Storage:     jetstream.FileStorage,
			Replicas:    c.o.Replicas,
		})
		if err == nil {
			c.log.Info("created the fleet snapshot bucket", "bucket", name, "replicas", c.o.Replicas)
		} else if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			obj, err = c.js.ObjectStore(ctx, name)
		}
	}
	if err != nil {
		return nil, c.setupError("snapshot bucket "+name, err)
	}
	c.obj = obj
	return obj, nil
}

// HasObject reports whether the snapshot bucket holds name.
func (c *Client) HasObject(ctx context.Context, name string) (bool, error) {
	obj, err := c.objects(ctx)
	if err != nil {
		return false, err
	}
	_, err = obj.GetInfo(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	}
	return false, err
}

// objectChunkSize is the size of an object's chunks: the object store's
// own default (nats.go's 128 KiB).
const objectChunkSize = 128 << 10

// PutObject stores data under name in the snapshot bucket (replacing it).
//
// It writes what jetstream's ObjectStore.Put writes (the chunks, then the
// meta message that makes them the object, then the chunks of the object
// it replaced purged), so every object store reader reads it, but through
// this client's JetStream context with synchronous publishes. nats.go's Put
// (v1.55.0, the newest) makes a JetStream context per call for
// asynchronous publishes; that context's reconnect watcher goroutine, when
// it starts after Put's clean-up has run, waits on a nil channel for ever:
// about one put in 300, a slow leak in a daemon that ships snapshots for
// weeks.
func (c *Client) PutObject(ctx context.Context, name string, data []byte) error {
	obj, err := c.objects(ctx)
	if err != nil {
		return err
	}
	replaced, err := obj.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	bucket := c.SnapshotBucket()
	info := jetstream.ObjectInfo{Bucket: bucket, NUID: rand.Text(), Size: uint64(len(data)),
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: objectChunkSize}}}
	chunks := objectChunks(bucket, info.NUID)
	digest := sha256.New()
	for off := 0; off < len(data); off += objectChunkSize {
		chunk := data[off:min(off+objectChunkSize, len(data))]
		digest.Write(chunk)
		if _, err := c.js.Publish(ctx, chunks, chunk); err != nil {
			c.purgeObjectChunks(ctx, chunks)
			return err
		}
		info.Chunks++
	}
	info.Digest = jetstream.GetObjectDigestValue(digest)
	meta := natsgo.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)))
	meta.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if meta.Data, err = json.Marshal(info); err != nil {
		c.purgeObjectChunks(ctx, chunks)
		return err
	}
	if _, err := c.js.PublishMsg(ctx, meta); err != nil {
		c.purgeObjectChunks(ctx, chunks)
		return err
	}
	if replaced != nil && !replaced.Deleted {
		c.purgeObjectChunks(ctx, objectChunks(bucket, replaced.NUID))
	}
	return nil
}

// objectChunks is the subject of the chunks of the object store bucket's
// object nuid.
func objectChunks(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// purgeObjectChunks removes chunks no object names (a put that failed half
// way, an object replaced). As in nats.go's Put, a failure is not the
// put's: the chunks only take room.
func (c *Client) purgeObjectChunks(ctx context.Context, subject string) {
	stream, err := c.js.Stream(ctx, "OBJ_"+c.SnapshotBucket())
	if err == nil {
		err = stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
	}
	if err != nil {
		c.log.Warn("fleet snapshots: could not purge unused object chunks; they only take room", "subject", subject, "err", err)
	}
}

// OpenObject opens name in the snapshot bucket for reading, streamed
// chunk by chunk (never whole in memory); size is the size the bucket
// records for it, which the reader's content may belie. The caller closes
// the reader. capsule.ErrFleetObjectMissing when absent.
func (c *Client) OpenObject(ctx context.Context, name string) (io.ReadCloser, int64, error) {
	obj, err := c.objects(ctx)
	if err != nil {
		return nil, 0, err
	}
	res, err := obj.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, 0, capsule.ErrFleetObjectMissing
	}
	if err != nil {
		return nil, 0, err
	}
	info, err := res.Info()
	if err != nil {
		res.Close()
		return nil, 0, err
	}
	if info.Size > math.MaxInt64 {
		res.Close()
		return nil, 0, fmt.Errorf("object %s: a size of %d bytes: %w", name, info.Size, capsule.ErrFleetObjectDamaged)
	}
	return digestChecked{res}, int64(info.Size), nil
}

// digestChecked names a digest mismatch capsule.ErrFleetObjectDamaged.
type digestChecked struct{ jetstream.ObjectResult }

func (d digestChecked) Read(p []byte) (int, error) {
	n, err := d.ObjectResult.Read(p)
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		err = fmt.Errorf("%w: %w", capsule.ErrFleetObjectDamaged, err)
	}
	return n, err
}

// ListObjects names the objects of the snapshot bucket starting with
// prefix. It reads every object's metadata: a listing, not a hot path.
func (c *Client) ListObjects(ctx context.Context, prefix string) ([]string, error) {
	obj, err := c.objects(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, prefix) {
			out = append(out, in.Name)
		}
	}
	return out, nil
}
