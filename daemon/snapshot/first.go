package snapshot

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/continuityd/continuityd/internal/safefile"
)

// A first snapshot, in process.
//
// The first Take of a new store adds every file of the tree. `git add -A`
// writes each as a loose object file: at 100,000 files, 100,000 files
// created under objects/, 8 to 26 s of system time here. Streamed into
// one pack instead (core.bigFileThreshold=1), git 2.39 looks each new
// object up in a list of those written before it, which is quadratic. A
// first snapshot therefore writes its objects itself into one pack
// (packwrite.go) and the private index itself (indexfile.go), with each
// file's stat data as it was opened, so the next full add reads again
// only the files that changed since.
//
// What it adds is what git add -A would add: the files `git ls-files -o
// --exclude-standard` lists under the store's rules (the ignore files, the
// store's info/exclude, the files over the size limit and the nested
// repositories the walk found, see excludeOversized). It reads them
// inside the workdir only (os.Root): a directory replaced by a link
// while it runs is never followed out of the tree. Whatever git would
// decide otherwise sends the Take to git add (errNotFirst): a directory
// git lists whole (a nested repository the walk did not see), a path
// that changed kind under it, a file larger than it reads in process.

// errNotFirst says a first snapshot cannot be written in process: git
// add stages it.
var errNotFirst = errors.New("the first snapshot needs git add")

// notFirst is errNotFirst with why, for the log.
func notFirst(why, p string) error { return fmt.Errorf("%w: %s: %q", errNotFirst, why, p) }

// canStageFirst reports whether this Take is a first snapshot that can
// be written in process: no snapshot and an empty private index, nothing
// forced in, a system that gives the index its stat data.
func (s *Store) canStageFirst(force []string, indexEntries int) bool {
	return indexStatKnown && !s.firstByGit && s.newest.n == 0 && indexEntries == 0 && len(force) == 0
}

// stagedFirst is what stageFirst wrote.
type stagedFirst struct {
	tree       string
	files      int       // the files (and links) in the tree
	unreadable []Skipped // the files it could not read (left out, named)
}

// treeFrame is a directory of the tree being written: its path (with a
// trailing "/", "" for the top) and its entries so far.
type treeFrame struct {
	dir     string
	entries []treeEntry
}

// stageFirst writes the first snapshot's objects and private index (see
// the comment at the top) and returns its tree.
func (s *Store) stageFirst(ctx context.Context) (stagedFirst, error) {
	var res stagedFirst
	root, err := os.OpenRoot(s.work)
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", s.work, err)
	}
	defer root.Close()
	// git's list is read as git writes it (its size grows with the tree);
	// returning early closes the pipe, which ends git, and waits for it.
	listed, lister := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := s.git.run(ctx, call{args: []string{"ls-files", "-z", "-o", "--exclude-standard"}, inWork: true, stdout: lister})
		lister.CloseWithError(err)
	}()
	defer func() {
		listed.Close()
		<-done
	}()
	list := bufio.NewReaderSize(listed, 64<<10)
	pack, err := newPackWriter(s.opt.Dir, firstChunk)
	if err != nil {
		return res, err
	}
	defer func() { pack.abort() }() // the pack of the moment
	index, err := newIndexWriter(s.git.index)
	if err != nil {
		return res, err
	}
	defer index.abort()
	stack := []treeFrame{{}}
	// closeTo writes the trees of the directories on the stack that do
	// not hold dir, deepest first.
	closeTo := func(dir string) error {
		for len(stack) > 1 && !strings.HasPrefix(dir, stack[len(stack)-1].dir) {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if len(top.entries) == 0 {
				continue // nothing in it could be read: git has no directory either
			}
			id, err := pack.add("tree", encodeTree(top.entries))
			if err != nil {
				return err
			}
			name := top.dir[:len(top.dir)-1]
			name = name[strings.LastIndexByte(name, '/')+1:]
			parent := &stack[len(stack)-1]
			parent.entries = append(parent.entries, treeEntry{name: name, mode: modeTree, id: id})
		}
		return nil
	}
	// Readers read, hash and compress a chunk of files at once (reads
	// overlap, compression uses every core); the writer then takes them
	// in order.
	readers := make([]*firstReader, firstReaders)
	for i := range readers {
		readers[i] = &firstReader{}
	}
	ahead := make([]firstRead, firstChunk)
	roots := &dirRoots{top: root, m: map[string]*os.Root{}}
	defer roots.closeAll()
	var buf []byte
	chunk := make([]string, 0, firstChunk)
	last := ""
	for listing := true; listing; {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		// The next chunk of git's list, in the index's order (git sorts
		// it; each directory's files come together).
		chunk = chunk[:0]
		for len(chunk) < firstChunk {
			p, err := list.ReadString(0)
			if err == io.EOF && p == "" {
				listing = false
				break
			}
			if err != nil {
				return res, fmt.Errorf("snapshot of %s: listing the files: %w", s.work, err)
			}
			p = p[:len(p)-1]
			if p <= last && last != "" {
				return res, notFirst("git listed the files out of order", p)
			}
			last = p
			chunk = append(chunk, p)
		}
		s.readAhead(roots, chunk, ahead, readers)
		for i, p := range chunk {
			r := &ahead[i]
			if r.skip {
				continue // the walk named it (ReasonGitName, ReasonPathTooLong)
			}
			if p == "" || strings.HasSuffix(p, "/") {
				return res, notFirst("git lists a directory whole", p)
			}
			dir := p[:strings.LastIndexByte(p, '/')+1]
			if err := closeTo(dir); err != nil {
				return res, err
			}
			for top := stack[len(stack)-1].dir; top != dir; top = stack[len(stack)-1].dir {
				next := dir[:len(top)+strings.IndexByte(dir[len(top):], '/')+1]
				if fi, err := root.Lstat(next[:len(next)-1]); err != nil || !fi.IsDir() {
					return res, notFirst("no longer a directory", next)
				}
				stack = append(stack, treeFrame{dir: next})
			}
			if errors.Is(r.err, errReadByWriter) {
				// Too large to read ahead: read it now, alone.
				if r.e, r.st, r.err = s.readForFirst(roots, p, &buf, maxObjectBytes); r.err == nil {
					r.e.id, r.err = pack.add("blob", buf)
				}
			} else if r.err == nil {
				r.err = pack.addCompressed(r.e.id, "blob", r.size, r.z)
			}
			switch err := r.err; {
			case errors.Is(err, errNotFirst):
				return res, err
			case errors.Is(err, fs.ErrNotExist):
				continue // gone since git listed it
			case errors.Is(err, errPackWrite):
				return res, err
			case err != nil:
				res.unreadable = append(res.unreadable, Skipped{Path: p, Reason: ReasonUnreadable})
				continue
			}
			if err := index.add(p, r.e.mode, r.e.id, r.st); err != nil {
				return res, err
			}
			top := &stack[len(stack)-1]
			top.entries = append(top.entries, r.e)
			res.files++
		}
		if len(pack.objs) >= s.firstPackObjects {
			// A pack's ids and offsets are held until it is written:
			// the next objects go to a new pack.
			if err := pack.finish(); err != nil {
				return res, err
			}
			if pack, err = newPackWriter(s.opt.Dir, firstChunk); err != nil {
				return res, err
			}
		}
	}
	s.setStep(StepTree)
	if err := closeTo(""); err != nil {
		return res, err
	}
	tree, err := pack.add("tree", encodeTree(stack[0].entries)) // the empty tree too: git writes it
	if err != nil {
		return res, err
	}
	s.reach(pointFirstObjects)
	if err := pack.finish(); err != nil {
		return res, err
	}
	s.reach(pointFirstPacked)
	if err := index.finish(); err != nil {
		return res, err
	}
	res.tree = tree.String()
	return res, nil
}

// skipByName reports whether git would leave path out for its name: a
// part git takes for .git, or a path too long (the walk names both).
func skipByName(work, p string) bool {
	if len(work)+1+len(p) > maxPathBytes {
		return true
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".git" || isDotGit(part) {
			return true
		}
	}
	return false
}

// How a first snapshot reads its files: firstReaders goroutines read,
// hash and compress firstChunk files at a time; a file over
// firstAheadBytes is left to the writer (errReadByWriter), so a chunk
// holds at most firstChunk × firstAheadBytes of compressed content.
const (
	firstReaders    = 4
	firstChunk      = 128
	firstAheadBytes = 64 << 10
)

// firstPackObjects bounds the objects of one pack of a first snapshot
// (Store.firstPackObjects; tests lower it): its ids and offsets are held
// until it is written, so a larger tree gets several packs, and memory
// stays bounded however large the tree.
const firstPackObjects = 1 << 18

// errReadByWriter: the file is too large to read ahead.
var errReadByWriter = errors.New("read by the writer")

// firstRead is one file of a first snapshot as a reader left it.
type firstRead struct {
	skip bool // left out for its name
	e    treeEntry
	st   indexStat
	size int    // the blob's size
	z    []byte // the blob, zlib-compressed
	err  error
}

// firstReader is one reader's state, kept from chunk to chunk.
type firstReader struct {
	buf []byte
	z   bytes.Buffer
	zw  *zlib.Writer
}

// readAhead reads the files of paths into out (out[i] for paths[i]) with
// the readers, one goroutine each, and returns when all are read.
func (s *Store) readAhead(roots *dirRoots, paths []string, out []firstRead, readers []*firstReader) {
	defer roots.closeAll()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(paths); i = int(next.Add(1) - 1) {
				out[i] = r.read(s, roots, paths[i])
			}
		})
	}
	wg.Wait()
}

// read reads, hashes and compresses one file.
func (r *firstReader) read(s *Store, roots *dirRoots, p string) firstRead {
	if p == "" || strings.HasSuffix(p, "/") {
		return firstRead{} // the writer refuses it
	}
	if skipByName(s.work, p) {
		return firstRead{skip: true}
	}
	var res firstRead
	if res.e, res.st, res.err = s.readForFirst(roots, p, &r.buf, firstAheadBytes); res.err != nil {
		return res
	}
	res.e.id, res.size = hashObject("blob", r.buf), len(r.buf)
	r.z.Reset()
	if r.zw == nil {
		r.zw, _ = zlib.NewWriterLevel(&r.z, zlib.BestSpeed)
	} else {
		r.zw.Reset(&r.z)
	}
	r.zw.Write(r.buf)
	r.zw.Close()
	res.z = bytes.Clone(r.z.Bytes())
	return res
}

// dirRoots opens the directories of a chunk's files once each, inside
// the workdir's root (which no link leads out of): a file is then one
// openat away instead of one per directory on its path.
type dirRoots struct {
	top *os.Root
	mu  sync.Mutex
	m   map[string]*os.Root
}

// of returns the root of the directory that holds p.
func (d *dirRoots) of(p string) (*os.Root, error) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return d.top, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.m[p[:i]]; ok {
		return r, nil
	}
	r, err := d.top.OpenRoot(p[:i])
	if err != nil {
		return nil, err
	}
	d.m[p[:i]] = r
	return r, nil
}

// closeAll closes the directories opened so far.
func (d *dirRoots) closeAll() {
	for dir, r := range d.m {
		r.Close()
		delete(d.m, dir)
	}
}

// readForFirst reads file p of the workdir into *buf for a first
// snapshot and returns its tree entry (without the id) and its stat data
// as it was opened. A link is read as its target. A file over limit is
// not read: errReadByWriter below maxObjectBytes, errNotFirst above.
func (s *Store) readForFirst(roots *dirRoots, p string, buf *[]byte, limit int64) (treeEntry, indexStat, error) {
	e := treeEntry{name: p[strings.LastIndexByte(p, '/')+1:], mode: modeFile}
	root, err := roots.of(p)
	if err != nil {
		return e, indexStat{}, err
	}
	fi, err := root.Lstat(e.name)
	if err != nil {
		return e, indexStat{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(e.name)
		if err != nil {
			return e, indexStat{}, err
		}
		st, _ := statOf(fi)
		e.mode, *buf = modeLink, append((*buf)[:0], target...)
		return e, st, nil
	}
	if !fi.Mode().IsRegular() {
		return e, indexStat{}, notFirst("no longer a file or a link", p)
	}
	f, fi, err := safefile.OpenIn(root, e.name)
	if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrOutside) {
		return e, indexStat{}, notFirst("changed kind while read", p)
	}
	if err != nil {
		return e, indexStat{}, err
	}
	defer f.Close()
	if fi.Size() > maxObjectBytes {
		return e, indexStat{}, notFirst("larger than read in process (no size limit set)", p)
	}
	if fi.Size() > limit {
		return e, indexStat{}, errReadByWriter
	}
	if fi.Mode()&0o100 != 0 {
		e.mode = modeExec // git keeps the owner's execute bit only
	}
	st, _ := statOf(fi)
	// What the file holds now, however its size changed since the stat
	// (the stat data then no longer matches: git reads it again).
	b := slices.Grow((*buf)[:0], int(fi.Size())+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return e, indexStat{}, err
		}
		if int64(len(b)) > limit {
			if limit < maxObjectBytes {
				return e, indexStat{}, errReadByWriter // it grew since the stat
			}
			return e, indexStat{}, notFirst("larger than read in process (no size limit set)", p)
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
	}
	*buf = b
	return e, st, nil
}
