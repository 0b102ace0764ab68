package nats

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestPutObjectIsAnObjectStoreObject: PutObject writes objects itself (not
// through nats.go's Put, which leaks a goroutine now and then), so what it
// writes must be what the object store writes: nats.go's own reader takes
// an object of several chunks (checking its size, chunk count and digest),
// an empty one, and one replaced by another, whose old chunks are purged.
func TestPutObjectIsAnObjectStoreObject(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, testServerOpts(t.TempDir()))
	c := newTestClient(t, []string{s.ClientURL()}, nil)
	nc, js := rawJS(t, s.ClientURL())
	defer nc.Close()

	big := bytes.Repeat([]byte("0123456789abcdef"), 3*objectChunkSize/16+100) // 4 chunks
	for name, data := range map[string][]byte{"git/big": big, "git/empty": {}, "snap/a/b": []byte("manifest\n")} {
		if err := c.PutObject(ctx, name, data); err != nil {
			t.Fatalf("put %s: %v", name, err)
		}
	}
	obj, err := js.ObjectStore(ctx, c.SnapshotBucket())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"git/big": big, "git/empty": {}, "snap/a/b": []byte("manifest\n")} {
		got, err := obj.GetBytes(ctx, name)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("nats.go reads %s as %d bytes (%v), want %d", name, len(got), err, len(data))
		}
	}
	info, err := obj.GetInfo(ctx, "git/big")
	if err != nil || info.Chunks != 4 || info.Size != uint64(len(big)) {
		t.Fatalf("info of a 4-chunk object: %+v %v", info, err)
	}

	// Replaced: the new content is read, and the old chunks are gone.
	if err := c.PutObject(ctx, "git/big", []byte("smaller\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := readObject(ctx, c, "git/big"); err != nil || string(got) != "smaller\n" {
		t.Fatalf("a replaced object reads %q, %v", got, err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+c.SnapshotBucket())
	if err != nil {
		t.Fatal(err)
	}
	si, err := stream.Info(ctx, jetstream.WithSubjectFilter(objectChunks(c.SnapshotBucket(), info.NUID)))
	if err != nil {
		t.Fatal(err)
	}
	if n := si.State.Subjects[objectChunks(c.SnapshotBucket(), info.NUID)]; n != 0 {
		t.Fatalf("the replaced object's chunks: %d messages left, want 0", n)
	}
	names, err := c.ListObjects(ctx, "git/")
	if err != nil || len(names) != 2 {
		t.Fatalf("objects under git/: %v %v", names, err)
	}
}

// readObject reads a whole object back through OpenObject's stream.
func readObject(ctx context.Context, c *Client, name string) ([]byte, error) {
	rc, _, err := c.OpenObject(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
