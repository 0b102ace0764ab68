// Package storage is the residency's storage engine below its rules: the
// group commit (Engine), the write-ahead log that makes each group durable
// with one fdatasync, the change records it carries and their replay into
// bbolt, recovery on open, the checks that tell a torn write from damage,
// and the guarded opening of the bbolt file. It knows buckets, keys and
// bytes, never what they mean: package residency's rules decide what goes
// into them, through the Hooks of each batch.
//
// # Why a log in front of bbolt
//
// bbolt syncs twice per commit (its pages, then the meta page that makes
// them current), and its NoSync mode is unsafe on power loss because a
// later transaction may reuse pages the last synced one still needs. So
// the store keeps one bbolt write transaction open across many batches and
// makes each batch durable by appending the batch's changes to the log and
// syncing it once; the bbolt transaction is committed, with bbolt's own
// syncs, at flushes off the answer path. bbolt records the id of the last
// record it holds; on open, records after it are replayed into bbolt.
//
// # The log file (residency.wal)
//
// The file is preallocated with zeros (4 MiB by default) and overwritten
// in place from the start after every flush to bbolt, so a sync writes
// data blocks only: no size or extent change for the filesystem to
// journal. It holds records back to back, from offset 0, with no file
// header and no padding. A record is a 16-byte header and its payload,
// integers little-endian:
//
//	offset 0   uint32  crc32c (Castagnoli) of bytes 4 .. 16+len
//	offset 4   uint32  len: the payload's length, never 0
//	offset 8   uint64  id: the record's number, one more than the record before
//	offset 16  [len]byte payload
//
// Reading stops at the first record whose checksum fails or whose id does
// not follow: a torn write (never acknowledged) or a stale record of an
// earlier lap (each lap starts past the last id bbolt holds, so stale
// records carry lower ids).
//
// # The payload: one batch's changes to bbolt
//
// A payload is every Put and Delete the batch made, in order; replaying
// them on the state bbolt held before the batch gives the state after it.
// Each change is
//
//	op byte (1 put, 2 delete) | uvarint len, bucket | uvarint len, key | [uvarint len, value: put only]
//
// # Damage
//
// A crash tears at most the one record being written, which was never
// answered, and what follows it is zeros or records of an earlier lap. A
// valid record with a higher id after the point where reading stopped was
// written after the damaged one: the records between are lost, and
// CheckLog refuses the log with a DamageError. A log that is missing,
// shorter than it was preallocated, or all zeros while bbolt says records
// were written and the last process did not close cleanly is refused too.
// Limit: damage to the very last record written looks exactly like a torn
// write and is treated as one.
//
// testdata/golden/residency.wal is a small log written by this code: the tests
// decode it and check that the writer still produces the same bytes (go
// test -run Golden -update rewrites it).
package storage
