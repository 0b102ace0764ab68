package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/continuityd/continuityd/internal/daemonside/gitpipe"
)

// Long-lived git processes: a Take from what changed asks git two kinds
// of question, what an object holds (packed objects: `git cat-file
// --batch`) and whether the ignore rules cover a new file (`git
// check-ignore --stdin`), and a process start per question would cost
// more than the answer. Each is started at its first use, kept while
// Takes use it, and stopped after pipeIdle without one, at a full Take
// (check-ignore reads each directory's rules once; a full Take follows
// any change of them) and at Close. Only a Take (holding the writer lock)
// uses them.

// pipeIdle is how long an unused git process is kept.
const pipeIdle = 30 * time.Second

// Pipes are the store's long-lived git processes.
type Pipes struct {
	repo        *Repo
	catFile     *gitpipe.Pipe
	checkIgnore *gitpipe.Pipe
	idle        *time.Timer // stops them after pipeIdle; nil when none runs
	onIdle      func()      // what the idle timer runs: the owner's Stop
	packedReads int         // objects read through cat-file (tests look)
}

// NewPipes are the long-lived processes of r; once pipeIdle passed
// without a use, onIdle runs (from a timer), to call Stop under the
// owner's lock.
func NewPipes(r *Repo, onIdle func()) *Pipes {
	return &Pipes{repo: r, onIdle: onIdle}
}

// start starts git with args in the work tree, talking over pipes.
func (ps *Pipes) start(env []string, args ...string) (*gitpipe.Pipe, error) {
	p, err := gitpipe.Start(ps.repo.git.Command(context.Background(), Call{Args: args, Env: env, InWork: true}))
	if err != nil {
		return nil, fmt.Errorf("snapshot store: git %s: %w", Summarize(args), err)
	}
	return p, nil
}

// pipe returns the running process at *slot, starting it when needed,
// and keeps the idle timer going.
func (ps *Pipes) pipe(slot **gitpipe.Pipe, env []string, args ...string) (*gitpipe.Pipe, error) {
	if *slot == nil {
		p, err := ps.start(env, args...)
		if err != nil {
			return nil, err
		}
		*slot = p
	}
	if ps.idle == nil {
		ps.idle = time.AfterFunc(pipeIdle, ps.onIdle)
	} else {
		ps.idle.Reset(pipeIdle)
	}
	return *slot, nil
}

// Stop stops the long-lived processes. The caller holds the lock their
// users hold.
func (ps *Pipes) Stop() {
	for _, slot := range []**gitpipe.Pipe{&ps.catFile, &ps.checkIgnore} {
		if *slot != nil {
			(*slot).Stop()
			*slot = nil
		}
	}
	if ps.idle != nil {
		ps.idle.Stop()
		ps.idle = nil
	}
}

// PackedReads is how many objects were read through cat-file (tests look).
func (ps *Pipes) PackedReads() int { return ps.packedReads }

// ReadObject reads object o: loose in process, else from the long-lived
// `git cat-file --batch`.
func (ps *Pipes) ReadObject(ctx context.Context, o OID) (string, []byte, error) {
	objs, err := ps.ReadObjects(ctx, []OID{o})
	if err != nil {
		return "", nil, err
	}
	return objs[0].Type, objs[0].Data, nil
}

// catFileBatch bounds the names written to cat-file before its answers
// are read: they fit in a pipe's buffer, so the write never waits on git,
// which may be waiting on its answers being read.
const catFileBatch = 256

// ReadObjects reads objects ids, in order: the loose ones in process, the
// others asked of the long-lived `git cat-file --batch` together (one
// round trip for a Take's changed files, not one each).
func (ps *Pipes) ReadObjects(ctx context.Context, ids []OID) ([]gitpipe.Object, error) {
	out := make([]gitpipe.Object, len(ids))
	var packed []int // indexes of ids not loose
	for i, o := range ids {
		typ, data, ok, err := ps.repo.ReadLoose(o)
		if err != nil {
			return nil, err
		}
		if !ok {
			packed = append(packed, i)
			continue
		}
		out[i] = gitpipe.Object{ID: o.String(), Type: typ, Data: data}
	}
	if len(packed) == 0 {
		return out, nil
	}
	p, err := ps.pipe(&ps.catFile, nil, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	defer context.AfterFunc(ctx, p.Kill)()
	ps.packedReads += len(packed)
	for start := 0; start < len(packed); start += catFileBatch {
		batch := packed[start:min(start+catFileBatch, len(packed))]
		if err := catFileSome(p, ids, batch, out); err != nil {
			ps.catFile = nil
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return nil, p.Failed("snapshot store: reading object "+ids[batch[0]].String(), err)
		}
	}
	return out, nil
}

// catFileSome asks cat-file --batch for the objects ids[i], i in which,
// and puts its answers in out[i].
func catFileSome(p *gitpipe.Pipe, ids []OID, which []int, out []gitpipe.Object) error {
	var names strings.Builder
	for _, i := range which {
		names.WriteString(ids[i].String() + "\n")
	}
	if _, err := io.WriteString(p.In, names.String()); err != nil {
		return err
	}
	for _, i := range which {
		o := ids[i]
		obj, err := gitpipe.ReadObject(p.Out, MaxObjectBytes)
		switch {
		case errors.Is(err, gitpipe.ErrMissing):
			return fmt.Errorf("object %s is missing from the store", o)
		case err != nil:
			return err
		case obj.ID != o.String():
			return fmt.Errorf("cat-file answered for %s when asked for %s", obj.ID, o)
		}
		out[i] = obj
	}
	return nil
}

// Ignored returns those of paths the ignore rules cover, as a run of
// `git check-ignore --no-index` does (the index and the size exclusions
// not counted), from the long-lived `git check-ignore`.
func (ps *Pipes) Ignored(ctx context.Context, paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	// --verbose --non-matching: one answer per path (source, line,
	// pattern, path), so the reader knows when git is done; a pattern
	// with "!" matched but leaves the path in.
	p, err := ps.pipe(&ps.checkIgnore, []string{"GIT_LITERAL_PATHSPECS=0"},
		"-c", "core.excludesFile=/dev/null", "check-ignore", "-z", "--no-index", "--stdin", "--verbose", "--non-matching")
	if err != nil {
		return nil, err
	}
	defer context.AfterFunc(ctx, p.Kill)()
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { // git answers as it reads: write beside the reading
		var b bytes.Buffer
		for _, q := range paths {
			b.WriteString(q)
			b.WriteByte(0)
		}
		_, werr = p.In.Write(b.Bytes())
	})
	ignored := map[string]bool{}
	var rerr error
	for _, want := range paths {
		var f [4]string
		for i := range f {
			if f[i], rerr = p.Out.ReadString(0); rerr != nil {
				break
			}
			f[i] = f[i][:len(f[i])-1]
		}
		if rerr != nil {
			break
		}
		if f[3] != want {
			rerr = fmt.Errorf("check-ignore answered for %q when asked about %q", f[3], want)
			break
		}
		if f[2] != "" && !strings.HasPrefix(f[2], "!") {
			ignored[want] = true
		}
	}
	if rerr != nil {
		p.Kill()
	}
	wg.Wait()
	if rerr == nil {
		rerr = werr
	}
	if rerr != nil {
		ps.checkIgnore = nil
		if ctx.Err() != nil {
			rerr = ctx.Err()
		}
		return nil, p.Failed("snapshot store: asking git about the ignore rules", rerr)
	}
	return ignored, nil
}

// IgnoredList is Ignored as a list, in the order of paths.
func (ps *Pipes) IgnoredList(ctx context.Context, paths []string) ([]string, error) {
	ignored, err := ps.Ignored(ctx, paths)
	if err != nil {
		return nil, err
	}
	var list []string
	for _, p := range paths {
		if ignored[p] {
			list = append(list, p)
		}
	}
	return list, nil
}
