package nats

import (
	"context"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Work snapshots across machines (the upstream's `snapshots = true`): the
// snapshots' git objects and manifests go to the object store
// BUCKET-snapshots ("continuityd-snapshots" by default), created when
// missing with Options.Replicas replicas and never changed when present.
// What goes under which name is daemon/fleetsnap's business; this client
// only stores, reads and lists named objects.

// SnapshotBucketSuffix follows Bucket in the object store's name.
const SnapshotBucketSuffix = "-snapshots"

// ErrNoObject is returned by GetObject for a name the bucket lacks.
var ErrNoObject = errors.New("no such object in the fleet's snapshot bucket")

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

// PutObject stores data under name in the snapshot bucket (replacing it).
func (c *Client) PutObject(ctx context.Context, name string, data []byte) error {
	obj, err := c.objects(ctx)
	if err != nil {
		return err
	}
	_, err = obj.PutBytes(ctx, name, data)
	return err
}

// GetObject reads name from the snapshot bucket; ErrNoObject when absent.
func (c *Client) GetObject(ctx context.Context, name string) ([]byte, error) {
	obj, err := c.objects(ctx)
	if err != nil {
		return nil, err
	}
	data, err := obj.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, ErrNoObject
	}
	return data, err
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
