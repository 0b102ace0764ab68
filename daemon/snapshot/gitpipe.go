package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Long-lived git processes: a Take from what changed asks git two kinds
// of question, what an object holds (packed objects: `git cat-file
// --batch`) and whether the ignore rules cover a new file (`git
// check-ignore --stdin`), and a process start per question would cost
// more than the answer. Each is started at its first use, kept while
// Takes use it, and stopped after pipeIdle without one, at a full Take
// (check-ignore reads each directory's rules once; a full Take follows
// any change of them) and at Close. Only a Take (holding s.mu) uses them.

// pipeIdle is how long an unused git process is kept.
const pipeIdle = 30 * time.Second

// gitPipe is one long-lived git process.
type gitPipe struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr limitedBuffer
}

// pipes are the store's long-lived git processes.
type pipes struct {
	catFile     *gitPipe
	checkIgnore *gitPipe
	idle        *time.Timer // stops them after pipeIdle; nil when none runs
	packedReads int         // objects read through cat-file (tests look)
}

// startPipe starts git with args in the work tree, talking over pipes.
func (s *Store) startPipe(env []string, args ...string) (*gitPipe, error) {
	p := &gitPipe{}
	p.stderr.max = 4 << 10
	p.cmd = s.git.command(context.Background(), call{args: args, env: env, inWork: true})
	p.cmd.Stderr = &p.stderr
	in, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("snapshot store: git %s: %w", summarize(args), err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("snapshot store: git %s: %w", summarize(args), err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("snapshot store: git %s: %w", summarize(args), err)
	}
	p.in, p.out = in, bufio.NewReaderSize(out, 64<<10)
	return p, nil
}

// stop ends the process and waits for it.
func (p *gitPipe) stop() {
	p.in.Close()
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// failed stops a process that answered wrongly and says what git said.
func (p *gitPipe) failed(what string, err error) error {
	p.stop()
	if msg := strings.TrimSpace(p.stderr.String()); msg != "" {
		return fmt.Errorf("snapshot store: %s: %w: git said %s", what, err, msg)
	}
	return fmt.Errorf("snapshot store: %s: %w", what, err)
}

// pipe returns the running process at *slot, starting it when needed,
// and keeps the idle timer going.
func (s *Store) pipe(slot **gitPipe, env []string, args ...string) (*gitPipe, error) {
	if *slot == nil {
		p, err := s.startPipe(env, args...)
		if err != nil {
			return nil, err
		}
		*slot = p
	}
	if s.pipes.idle == nil {
		s.pipes.idle = time.AfterFunc(pipeIdle, s.stopIdlePipes)
	} else {
		s.pipes.idle.Reset(pipeIdle)
	}
	return *slot, nil
}

// stopIdlePipes runs from the idle timer.
func (s *Store) stopIdlePipes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopPipes()
}

// stopPipes stops the long-lived processes, and lets go of what Takes
// from what changed keep between them (parsed trees, the compressor): an
// idle daemon holds none of it. The caller holds s.mu.
func (s *Store) stopPipes() {
	s.trees, s.zw = treeCache{}, nil
	for _, slot := range []**gitPipe{&s.pipes.catFile, &s.pipes.checkIgnore} {
		if *slot != nil {
			(*slot).stop()
			*slot = nil
		}
	}
	if s.pipes.idle != nil {
		s.pipes.idle.Stop()
		s.pipes.idle = nil
	}
}

// readObject reads object o: loose in process, else from the long-lived
// `git cat-file --batch`.
func (s *Store) readObject(ctx context.Context, o oid) (string, []byte, error) {
	typ, data, ok, err := s.readLoose(o)
	if ok || err != nil {
		return typ, data, err
	}
	p, err := s.pipe(&s.pipes.catFile, nil, "cat-file", "--batch")
	if err != nil {
		return "", nil, err
	}
	defer context.AfterFunc(ctx, func() { p.cmd.Process.Kill() })()
	s.pipes.packedReads++
	typ, data, err = catFileOne(p, o)
	if err != nil {
		s.pipes.catFile = nil
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", nil, p.failed("reading object "+o.String(), err)
	}
	return typ, data, nil
}

// catFileOne asks cat-file --batch for one object.
func catFileOne(p *gitPipe, o oid) (string, []byte, error) {
	if _, err := io.WriteString(p.in, o.String()+"\n"); err != nil {
		return "", nil, err
	}
	head, err := p.out.ReadString('\n')
	if err != nil {
		return "", nil, err
	}
	f := strings.Fields(head)
	if len(f) == 2 && f[1] == "missing" {
		return "", nil, fmt.Errorf("object %s is missing from the store", o)
	}
	if len(f) != 3 || f[0] != o.String() {
		return "", nil, fmt.Errorf("cat-file said %q", strings.TrimSpace(head))
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 || size > maxObjectBytes {
		return "", nil, fmt.Errorf("cat-file gave the size %q", f[2])
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(p.out, data); err != nil {
		return "", nil, err
	}
	if data[size] != '\n' {
		return "", nil, fmt.Errorf("cat-file's answer for %s does not end where its size says", o)
	}
	return f[1], data[:size], nil
}

// ignoredOfPipe returns those of paths the ignore rules cover, as
// ignoredOf does (the index and the size exclusions not counted), from
// the long-lived `git check-ignore`.
func (s *Store) ignoredOfPipe(ctx context.Context, paths []string) (map[string]bool, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	// --verbose --non-matching: one answer per path (source, line,
	// pattern, path), so the reader knows when git is done; a pattern
	// with "!" matched but leaves the path in.
	p, err := s.pipe(&s.pipes.checkIgnore, []string{"GIT_LITERAL_PATHSPECS=0"},
		"-c", "core.excludesFile=/dev/null", "check-ignore", "-z", "--no-index", "--stdin", "--verbose", "--non-matching")
	if err != nil {
		return nil, err
	}
	defer context.AfterFunc(ctx, func() { p.cmd.Process.Kill() })()
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { // git answers as it reads: write beside the reading
		var b bytes.Buffer
		for _, q := range paths {
			b.WriteString(q)
			b.WriteByte(0)
		}
		_, werr = p.in.Write(b.Bytes())
	})
	ignored := map[string]bool{}
	var rerr error
	for _, want := range paths {
		var f [4]string
		for i := range f {
			if f[i], rerr = p.out.ReadString(0); rerr != nil {
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
		p.cmd.Process.Kill()
	}
	wg.Wait()
	if rerr == nil {
		rerr = werr
	}
	if rerr != nil {
		s.pipes.checkIgnore = nil
		if ctx.Err() != nil {
			rerr = ctx.Err()
		}
		return nil, p.failed("asking git about the ignore rules", rerr)
	}
	return ignored, nil
}

// ignoredOfPipeList is ignoredOfPipe as a list, in the order of paths.
func (s *Store) ignoredOfPipeList(ctx context.Context, paths []string) ([]string, error) {
	ignored, err := s.ignoredOfPipe(ctx, paths)
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
