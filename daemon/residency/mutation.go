package residency

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A batch's changes to bbolt, as the write-ahead log carries them: every Put
// and Delete in the order it was made. Replaying them on the state bbolt
// held before the batch gives the state after it.
//
//	op byte (mutPut|mutDelete) | uvarint len, bucket | uvarint len, key | [uvarint len, value]

const (
	mutPut    = 1
	mutDelete = 2
)

// recorder applies changes to a bbolt transaction and records them.
type recorder struct {
	tx  *bolt.Tx
	buf []byte
}

func (r *recorder) put(bucket, key, value []byte) error {
	if err := r.tx.Bucket(bucket).Put(key, value); err != nil {
		return err
	}
	r.buf = append(r.buf, mutPut)
	r.buf = appendBytes(r.buf, bucket)
	r.buf = appendBytes(r.buf, key)
	r.buf = appendBytes(r.buf, value)
	return nil
}

func (r *recorder) delete(bucket, key []byte) error {
	if err := r.tx.Bucket(bucket).Delete(key); err != nil {
		return err
	}
	r.buf = append(r.buf, mutDelete)
	r.buf = appendBytes(r.buf, bucket)
	r.buf = appendBytes(r.buf, key)
	return nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errBadMutation = errors.New("malformed change record")

// replay applies a recorded payload to tx. Values are copied: bbolt keeps
// references to what Put is given until the transaction ends.
func replay(tx *bolt.Tx, payload []byte) error {
	next := func() ([]byte, error) {
		n, k := binary.Uvarint(payload)
		if k <= 0 || uint64(len(payload)-k) < n {
			return nil, errBadMutation
		}
		v := append([]byte(nil), payload[k:k+int(n)]...)
		payload = payload[k+int(n):]
		return v, nil
	}
	for len(payload) > 0 {
		op := payload[0]
		payload = payload[1:]
		bucket, err := next()
		if err != nil {
			return err
		}
		key, err := next()
		if err != nil {
			return err
		}
		b := tx.Bucket(bucket)
		if b == nil {
			return fmt.Errorf("%w: unknown bucket %q", errBadMutation, bucket)
		}
		switch op {
		case mutPut:
			val, err := next()
			if err != nil {
				return err
			}
			if err := b.Put(key, val); err != nil {
				return err
			}
		case mutDelete:
			if err := b.Delete(key); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: op %d", errBadMutation, op)
		}
	}
	return nil
}
