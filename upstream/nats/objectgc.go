package nats

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/continuityd/continuityd/capsule"
)

// What the fleet's snapshot retention (daemon/fleetsnap's Keeper) asks of
// the bucket: the server's clock, an object's record with its position in
// the bucket's stream, and a touch and a delete that each take effect only
// if that record is still the object's last (a compare-and-set on the
// stream's last sequence for the object's meta subject). The argument
// that makes retention safe against another machine shipping the same
// object at the same moment is daemon/fleetsnap's.

// objectStream is the snapshot bucket's underlying stream.
func (c *Client) objectStream(ctx context.Context) (jetstream.Stream, error) {
	if _, err := c.objects(ctx); err != nil {
		return nil, err
	}
	return c.js.Stream(ctx, "OBJ_"+c.SnapshotBucket())
}

// metaSubject is the subject of object name's record.
func (c *Client) metaSubject(name string) string {
	return "$O." + c.SnapshotBucket() + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// ServerTime is the fleet server's clock now (as its stream info says):
// the times retention compares are all the server's, so the machines'
// clocks need not agree.
func (c *Client) ServerTime(ctx context.Context) (time.Time, error) {
	s, err := c.objectStream(ctx)
	if err != nil {
		return time.Time{}, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if info.TimeStamp.IsZero() {
		return time.Time{}, errors.New("nats: the server does not say its time (stream info without ts); fleet snapshot retention needs nats-server 2.10 or newer")
	}
	return info.TimeStamp, nil
}

// objectRecord is an object's last record and its info.
func (c *Client) objectRecord(ctx context.Context, name string) (*jetstream.RawStreamMsg, jetstream.ObjectInfo, error) {
	s, err := c.objectStream(ctx)
	if err != nil {
		return nil, jetstream.ObjectInfo{}, err
	}
	m, err := s.GetLastMsgForSubject(ctx, c.metaSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, jetstream.ObjectInfo{}, fmt.Errorf("%s: %w", name, capsule.ErrFleetObjectMissing)
	}
	if err != nil {
		return nil, jetstream.ObjectInfo{}, err
	}
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return nil, jetstream.ObjectInfo{}, fmt.Errorf("object %s: its record is not an object's (%v): %w", name, err, capsule.ErrFleetObjectDamaged)
	}
	if info.Deleted {
		return nil, jetstream.ObjectInfo{}, fmt.Errorf("%s: %w", name, capsule.ErrFleetObjectMissing)
	}
	return m, info, nil
}

// StatObject is object name's record: its size, its position and the
// server's time of its last put or touch. capsule.ErrFleetObjectMissing
// when the bucket lacks it.
func (c *Client) StatObject(ctx context.Context, name string) (capsule.FleetObject, error) {
	m, info, err := c.objectRecord(ctx, name)
	if err != nil {
		return capsule.FleetObject{}, err
	}
	return capsule.FleetObject{Name: name, Size: int64(info.Size), Seq: m.Sequence, At: m.Time}, nil
}

// TouchObject writes o's record again, unchanged but for its time (the
// server's now), if it is still at o.Seq: a machine about to name o in a
// manifest tells retention it is wanted. capsule.ErrFleetObjectChanged
// when it is not (deleted or written meanwhile).
func (c *Client) TouchObject(ctx context.Context, o capsule.FleetObject) error {
	m, _, err := c.objectRecord(ctx, o.Name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return fmt.Errorf("%s: %w", o.Name, capsule.ErrFleetObjectChanged)
	}
	if err != nil {
		return err
	}
	if m.Sequence != o.Seq {
		return fmt.Errorf("%s: %w", o.Name, capsule.ErrFleetObjectChanged)
	}
	return c.putRecord(ctx, o, m.Data)
}

// putRecord publishes record data for o, if o's record is still at o.Seq.
func (c *Client) putRecord(ctx context.Context, o capsule.FleetObject, data []byte) error {
	msg := natsgo.NewMsg(c.metaSubject(o.Name))
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = data
	_, err := c.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(o.Seq))
	if wrongLast(err) {
		return fmt.Errorf("%s: %w", o.Name, capsule.ErrFleetObjectChanged)
	}
	return err
}

// wrongLast reports a compare-and-set that found another last record.
func wrongLast(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// DeleteObject deletes o if its record is still at o.Seq (nothing put or
// touched it since it was looked at): a delete marker in its place, then
// its chunks and the records up to the marker purged, so the bucket's
// stream keeps nothing of it. capsule.ErrFleetObjectChanged when it is
// not.
func (c *Client) DeleteObject(ctx context.Context, o capsule.FleetObject) error {
	m, info, err := c.objectRecord(ctx, o.Name)
	if errors.Is(err, capsule.ErrFleetObjectMissing) {
		return nil // gone already
	}
	if err != nil {
		return err
	}
	if m.Sequence != o.Seq {
		return fmt.Errorf("%s: %w", o.Name, capsule.ErrFleetObjectChanged)
	}
	nuid := info.NUID
	info.Deleted = true
	info.Size, info.Chunks, info.Digest = 0, 0, ""
	info.ModTime = time.Time{}
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	msg := natsgo.NewMsg(c.metaSubject(o.Name))
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = data
	ack, err := c.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequencePerSubject(o.Seq))
	if wrongLast(err) {
		return fmt.Errorf("%s: %w", o.Name, capsule.ErrFleetObjectChanged)
	}
	if err != nil {
		return err
	}
	s, err := c.objectStream(ctx)
	if err != nil {
		return err
	}
	if nuid != "" {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(objectChunks(c.SnapshotBucket(), nuid))); err != nil {
			return err
		}
	}
	// The marker too: a put of the same name since has a later sequence
	// and stays.
	return s.Purge(ctx, jetstream.WithPurgeSubject(c.metaSubject(o.Name)), jetstream.WithPurgeSequence(ack.Sequence+1))
}

// ObjectList lists the objects of the snapshot bucket starting with
// prefix: name, size and the server's time of the last put or touch (Seq
// 0: StatObject says it). A listing reads every object's record.
func (c *Client) ObjectList(ctx context.Context, prefix string) ([]capsule.FleetObject, error) {
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
	var out []capsule.FleetObject
	for _, in := range infos {
		if strings.HasPrefix(in.Name, prefix) {
			out = append(out, capsule.FleetObject{Name: in.Name, Size: int64(in.Size), At: in.ModTime})
		}
	}
	return out, nil
}
