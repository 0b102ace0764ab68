package gitpipe

import (
	"bufio"
	"errors"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ReadObject reads an answer and stays in step after a missing name (one
// with spaces too), an object over the limit, and an empty object; a
// header that is not cat-file's, or content shorter than its size, is an
// error.
func TestReadObject(t *testing.T) {
	answers := "1234 blob 5\nhello\n" +
		"abcd:./a dir missing\n" +
		"beef tree 6\nbigger\n" +
		"cafe blob 0\n\n" +
		"dead ambiguous\n" +
		"f00d commit 3\nxyz\n"
	r := bufio.NewReader(strings.NewReader(answers))
	want := []struct {
		id, typ, data string
		err           error
	}{
		{"1234", "blob", "hello", nil},
		{"", "", "", ErrMissing},
		{"", "", "", ErrTooLarge},
		{"cafe", "blob", "", nil},
		{"", "", "", ErrMissing},
		{"f00d", "commit", "xyz", nil},
	}
	for i, w := range want {
		o, err := ReadObject(r, 5)
		if !errors.Is(err, w.err) || (w.err == nil && err != nil) {
			t.Fatalf("answer %d: error %v, want %v", i, err, w.err)
		}
		if o.ID != w.id || o.Type != w.typ || string(o.Data) != w.data {
			t.Errorf("answer %d: %+v, want %s %s %q", i, o, w.id, w.typ, w.data)
		}
	}
	for _, bad := range []string{"1234 blob\n", "1234 blob x\n", "1234 blob 5\nhel", "1234 blob 2\nhey\n", "1234 blob -1\n"} {
		if _, err := ReadObject(bufio.NewReader(strings.NewReader(bad)), 5); err == nil || errors.Is(err, ErrMissing) || errors.Is(err, ErrTooLarge) {
			t.Errorf("%q: %v, want an error that stops the pipe", bad, err)
		}
	}
}

// EachTreeEntry walks a tree of either hash's ids and refuses a cut one.
func TestEachTreeEntry(t *testing.T) {
	for _, idLen := range []int{20, 32} {
		id := strings.Repeat("\x01", idLen)
		tree := "100644 a.go\x00" + id + "40000 dir\x00" + id + "160000 sub mod\x00" + id
		var got []string
		err := EachTreeEntry([]byte(tree), idLen, func(mode uint32, name, eid []byte) {
			if string(eid) != id {
				t.Errorf("entry %s: id %x", name, eid)
			}
			got = append(got, string(name)+":"+strconv.FormatUint(uint64(mode), 8))
		})
		if err != nil || !slices.Equal(got, []string{"a.go:100644", "dir:40000", "sub mod:160000"}) {
			t.Errorf("id length %d: %v, %v", idLen, got, err)
		}
		if err := EachTreeEntry([]byte(tree[:len(tree)-1]), idLen, func(uint32, []byte, []byte) {}); err == nil {
			t.Errorf("id length %d: a cut tree parsed", idLen)
		}
	}
	if err := EachTreeEntry([]byte("10x644 a\x00"+strings.Repeat("\x01", 20)), 20, func(uint32, []byte, []byte) {}); err == nil {
		t.Error("a mode that is not octal parsed")
	}
}

// A Pipe talks to a running process, says what it said on stderr when it
// failed, and Stop leaves nothing running (goleak checks exec's copying
// goroutine).
func TestPipe(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", `read line; echo "got $line"; echo "the reason" >&2; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.In.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := p.Out.ReadString('\n')
	if err != nil || line != "got hello\n" {
		t.Fatalf("answer %q, %v", line, err)
	}
	_, err = p.Out.ReadString('\n')
	err = p.Failed("asking sh", err)
	if !strings.Contains(err.Error(), "asking sh") || !strings.Contains(err.Error(), "the reason") {
		t.Errorf("Failed said %v", err)
	}
}
