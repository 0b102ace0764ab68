package asowner

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/continuityd/continuityd/daemon/snapshot"
)

// The objects of a snapshot cross the wire as streams: ReadObjects'
// answer and ReceiveObject's request carry the content as it comes, not
// in one JSON document.

const (
	// maxTreeBytes bounds a commit or tree read from the worker.
	maxTreeBytes = 64 << 20
	// maxUnboundedBlob bounds a blob read from the worker when the
	// store's max_file_size sets none.
	maxUnboundedBlob = 1 << 30
	// minBlobBound is the least bound of a blob read: a store whose
	// max_file_size was lowered still holds the larger files of its
	// older snapshots.
	minBlobBound = 64 << 20
	// maxEndLine bounds a read_objects stream's header or last line.
	maxEndLine = 2*maxMessage + 1024
)

// maxObject bounds one object of type typ read from the worker.
func (s *Store) maxObject(typ string) int64 {
	switch {
	case typ != "blob":
		return maxTreeBytes
	case s.opt.MaxFileBytes < 0:
		return maxUnboundedBlob
	case s.opt.MaxFileBytes == 0:
		return max(snapshot.DefaultMaxFileBytes, minBlobBound)
	}
	return max(s.opt.MaxFileBytes, minBlobBound)
}

// ReadObjects is (*snapshot.Store).ReadObjects. Each object the worker
// streams must be the one asked for next, within its bound, and hash to
// its id.
func (s *Store) ReadObjects(ctx context.Context, ids []string, fn func(o snapshot.Object, data []byte) error) error {
	if s.closed.Load() {
		return snapshot.ErrClosed
	}
	for _, id := range ids {
		if !hashRE.MatchString(id) {
			return fmt.Errorf("snapshot store: %q is not a git object id", id)
		}
	}
	s.mu.Lock()
	p, store, err := s.openLocked(ctx)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	body, err := json.Marshal(request{Store: store, IDs: ids})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := p.post(ctx, opReadObjects, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, err := readBounded(resp.Body, maxAnswer)
		if err != nil {
			return p.broke(ctx, opReadObjects, err)
		}
		if resp.StatusCode != http.StatusUnprocessableEntity {
			return s.w.garbage(opReadObjects, fmt.Errorf("HTTP status %d", resp.StatusCode))
		}
		return s.w.fromWire(opReadObjects, raw)
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for i := 0; ; i++ {
		line, err := readLine(br, maxEndLine)
		if err != nil {
			return p.broke(ctx, opReadObjects, err)
		}
		var h objectHeader
		if err := decodeStrict(line, &h); err != nil {
			return s.w.garbage(opReadObjects, err)
		}
		switch {
		case h.Error != nil:
			raw, _ := json.Marshal(h.Error)
			return s.w.fromWire(opReadObjects, raw)
		case h.End && i == len(ids):
			return nil
		case h.End:
			return s.w.garbage(opReadObjects, fmt.Errorf("the stream ended after %d of %d objects", i, len(ids)))
		case i >= len(ids) || h.ID != ids[i]:
			return s.w.garbage(opReadObjects, fmt.Errorf("object %q where none or another was due", cut(h.ID, 64)))
		case h.Type != "commit" && h.Type != "tree" && h.Type != "blob":
			return s.w.garbage(opReadObjects, fmt.Errorf("object %s of type %q", h.ID, cut(h.Type, 16)))
		case h.Size < 0 || h.Size > s.maxObject(h.Type):
			return s.w.garbage(opReadObjects, fmt.Errorf("object %s of %d bytes, over the bound of %d", h.ID, h.Size, s.maxObject(h.Type)))
		}
		data := make([]byte, h.Size)
		if _, err := io.ReadFull(br, data); err != nil {
			return p.broke(ctx, opReadObjects, err)
		}
		if sum := objectHash(h.Type, data); sum != h.ID {
			return s.w.garbage(opReadObjects, fmt.Errorf("object %s hashes to %s", h.ID, sum))
		}
		if err := fn(snapshot.Object{ID: h.ID, Type: h.Type}, data); err != nil {
			return err
		}
	}
}

// objectHash is git's name for an object: the SHA-1 of its header and
// content.
func objectHash(typ string, data []byte) string {
	h := sha1.New()
	h.Write([]byte(typ + " " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// ReceiveObject is (*snapshot.Store).ReceiveObject: r is streamed to the
// worker, whose store checks the object as it would in process.
func (s *Store) ReceiveObject(ctx context.Context, o snapshot.Object, size int64, r io.Reader) error {
	if s.closed.Load() {
		return snapshot.ErrClosed
	}
	s.mu.Lock()
	p, store, err := s.openLocked(ctx)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	head, err := json.Marshal(request{Store: store, Object: &o, Size: size})
	if err != nil {
		return err
	}
	resp, err := p.post(ctx, opReceiveObject, io.MultiReader(bytes.NewReader(append(head, '\n')), r))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := readBounded(resp.Body, maxAnswer)
	if err != nil {
		return p.broke(ctx, opReceiveObject, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return decodeStrict(raw, &empty{})
	case http.StatusUnprocessableEntity:
		return s.w.fromWire(opReceiveObject, raw)
	}
	return s.w.garbage(opReceiveObject, fmt.Errorf("HTTP status %d", resp.StatusCode))
}
