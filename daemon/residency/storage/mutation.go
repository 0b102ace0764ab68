package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The change ops of a payload (see the package comment).
const (
	OpPut    = 1
	OpDelete = 2
)

// Mutation is one change of a payload.
type Mutation struct {
	Op                 byte
	Bucket, Key, Value []byte // Value: OpPut only
}

// AppendPut appends a put of value under key in bucket to a payload.
func AppendPut(b, bucket, key, value []byte) []byte {
	b = append(b, OpPut)
	return appendBytes(appendBytes(appendBytes(b, bucket), key), value)
}

// AppendDelete appends a delete of key in bucket to a payload.
func AppendDelete(b, bucket, key []byte) []byte {
	b = append(b, OpDelete)
	return appendBytes(appendBytes(b, bucket), key)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Recorder applies changes to a bbolt transaction and records them as a
// payload.
type Recorder struct {
	tx  *bolt.Tx
	buf []byte
}

// NewRecorder records the changes made to tx through it; size is what the
// payload is expected to take (the last batch's), to be allocated once.
func NewRecorder(tx *bolt.Tx, size int) *Recorder {
	return &Recorder{tx: tx, buf: make([]byte, 0, size)}
}

// Put puts value under key in bucket, and records it.
func (r *Recorder) Put(bucket, key, value []byte) error {
	if err := r.tx.Bucket(bucket).Put(key, value); err != nil {
		return err
	}
	r.buf = AppendPut(r.buf, bucket, key, value)
	return nil
}

// Delete deletes key from bucket, and records it.
func (r *Recorder) Delete(bucket, key []byte) error {
	if err := r.tx.Bucket(bucket).Delete(key); err != nil {
		return err
	}
	r.buf = AppendDelete(r.buf, bucket, key)
	return nil
}

// Get reads key in bucket as the transaction holds it (changes made
// through r included). The value is valid until the transaction ends.
func (r *Recorder) Get(bucket, key []byte) []byte { return r.tx.Bucket(bucket).Get(key) }

// Keys lists, in order, copies of the keys of bucket that start with
// prefix, as long as while holds for them (nil: all of them).
func (r *Recorder) Keys(bucket, prefix []byte, while func(k []byte) bool) [][]byte {
	var keys [][]byte
	c := r.tx.Bucket(bucket).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (while == nil || while(k)); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	return keys
}

// Payload is the changes recorded so far.
func (r *Recorder) Payload() []byte { return r.buf }

var errBadMutation = errors.New("malformed change record")

// DecodeMutations decodes a payload. Values are copies: bbolt keeps
// references to what Put is given until the transaction ends.
func DecodeMutations(payload []byte) ([]Mutation, error) {
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(payload)
		if k <= 0 || uint64(len(payload)-k) < n {
			return nil, errBadMutation
		}
		v := append([]byte(nil), payload[k:k+int(n)]...)
		payload = payload[k+int(n):]
		return v, nil
	}
	var ms []Mutation
	for len(payload) > 0 {
		m := Mutation{Op: payload[0]}
		payload = payload[1:]
		if m.Op != OpPut && m.Op != OpDelete {
			return nil, fmt.Errorf("%w: op %d", errBadMutation, m.Op)
		}
		var err error
		if m.Bucket, err = next(); err != nil {
			return nil, err
		}
		if m.Key, err = next(); err != nil {
			return nil, err
		}
		if m.Op == OpPut {
			if m.Value, err = next(); err != nil {
				return nil, err
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// Replay applies a recorded payload to tx.
func Replay(tx *bolt.Tx, payload []byte) error {
	ms, err := DecodeMutations(payload)
	if err != nil {
		return err
	}
	for _, m := range ms {
		b := tx.Bucket(m.Bucket)
		if b == nil {
			return fmt.Errorf("%w: unknown bucket %q", errBadMutation, m.Bucket)
		}
		if m.Op == OpPut {
			err = b.Put(m.Key, m.Value)
		} else {
			err = b.Delete(m.Key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
