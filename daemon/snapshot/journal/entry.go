package journal

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// Entry is one version of one file.
type Entry struct {
	Seq     uint64
	Path    string // relative to the workdir, with "/"
	At      time.Time
	Blob    [20]byte // zero when Flags say nothing is kept
	Mode    uint32   // git's: 0o100644, 0o100755, 0o120000
	Size    int64
	Lines   int
	Flags   uint8
	By      string // the agent's name, "" for outside (attribution's)
	Session string // the agent's session it was made in, when known
	// Turn is when the agent's turn it was made in began (its prompt),
	// zero when not known.
	Turn time.Time
}

// Entry flags.
const (
	FlagGone      = 1 // the file was deleted
	FlagTooLarge  = 2 // over max_file_size: not kept
	FlagNestedRep = 4 // inside a nested repository: not kept
)

// Kept reports whether the entry holds a content.
func (e Entry) Kept() bool { return e.Flags == 0 }

// entryVersion is the version encode writes; decodeEntry reads 1 (no
// turn) too.
const entryVersion = 2

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errDamaged is a stored entry that does not check.
var errDamaged = errors.New("a journal entry does not check (damaged)")

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encode is the entry as stored (see doc.go).
func (e Entry) encode() []byte {
	b := make([]byte, 0, 64+len(e.Path)+len(e.By)+len(e.Session))
	b = append(b, entryVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.At.UnixNano()))
	b = append(b, e.Blob[:]...)
	b = binary.BigEndian.AppendUint32(b, e.Mode)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Size))
	b = binary.BigEndian.AppendUint32(b, uint32(e.Lines))
	b = append(b, e.Flags)
	b = appendString(b, e.By)
	b = appendString(b, e.Session)
	b = appendString(b, e.Path)
	var turn int64
	if !e.Turn.IsZero() {
		turn = e.Turn.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(turn))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeEntry reads an entry stored under seq; errDamaged when it does
// not check.
func decodeEntry(seq uint64, b []byte) (Entry, error) {
	if len(b) < 1+8+20+4+8+4+1+3+4 || b[0] != 1 && b[0] != entryVersion {
		return Entry{}, errDamaged
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return Entry{}, errDamaged
	}
	e := Entry{Seq: seq}
	p := body[1:]
	e.At = time.Unix(0, int64(binary.BigEndian.Uint64(p)))
	p = p[8:]
	copy(e.Blob[:], p[:20])
	p = p[20:]
	e.Mode = binary.BigEndian.Uint32(p)
	e.Size = int64(binary.BigEndian.Uint64(p[4:]))
	e.Lines = int(binary.BigEndian.Uint32(p[12:]))
	e.Flags = p[16]
	p = p[17:]
	var ok bool
	for _, dst := range []*string{&e.By, &e.Session, &e.Path} {
		if *dst, p, ok = readString(p); !ok {
			return Entry{}, errDamaged
		}
	}
	if body[0] >= 2 {
		if len(p) < 8 {
			return Entry{}, errDamaged
		}
		if turn := int64(binary.BigEndian.Uint64(p)); turn != 0 {
			e.Turn = time.Unix(0, turn)
		}
		p = p[8:]
	}
	if len(p) != 0 {
		return Entry{}, errDamaged
	}
	return e, nil
}

func readString(p []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(p)
	if k <= 0 || uint64(len(p)-k) < n {
		return "", nil, false
	}
	return string(p[k : k+int(n)]), p[k+int(n):], true
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func pathKey(path string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(path), 0), seq)
}

// blobVal is bucket b's value: the blob's size and how many entries hold it.
func blobVal(size int64, refs uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(size)), refs)
}

func readBlobVal(v []byte) (int64, uint32) {
	if len(v) != 12 {
		return 0, 0
	}
	return int64(binary.BigEndian.Uint64(v)), binary.BigEndian.Uint32(v[8:])
}

// Thinned is what retention dropped of one file's versions: how many,
// how many for their age and how many for the byte bound, the oldest's
// and the newest's times. The rules in force (KeepAll, KeepHourly,
// MaxBytes) are not stored: History fills them in, for String.
type Thinned struct {
	Count, ByAge, ByBytes int
	First, Last           time.Time

	KeepAll, KeepHourly time.Duration
	MaxBytes            int64
}

// encode is bucket t's value: count (8) | first (8) | last (8) |
// by age (8) | by bytes (8); a value of the first three alone (an older
// journal's) counts every version as thinned by age.
func (t Thinned) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(t.Count))
	b = binary.BigEndian.AppendUint64(b, uint64(t.First.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(t.Last.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(t.ByAge))
	return binary.BigEndian.AppendUint64(b, uint64(t.ByBytes))
}

func decodeThinned(v []byte) Thinned {
	if len(v) != 24 && len(v) != 40 {
		return Thinned{}
	}
	t := Thinned{Count: int(binary.BigEndian.Uint64(v)), First: time.Unix(0, int64(binary.BigEndian.Uint64(v[8:]))),
		Last: time.Unix(0, int64(binary.BigEndian.Uint64(v[16:])))}
	t.ByAge = t.Count
	if len(v) == 40 {
		t.ByAge, t.ByBytes = int(binary.BigEndian.Uint64(v[24:])), int(binary.BigEndian.Uint64(v[32:]))
	}
	return t
}
