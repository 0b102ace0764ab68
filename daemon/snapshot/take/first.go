package take

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
	"strings"
	"sync"
	"sync/atomic"

	"github.com/continuityd/continuityd/daemon/snapshot/repo"
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
// (repo.PackWriter) and the private index itself (repo.IndexWriter), with each
// file's stat data as it was opened, so the next full add reads again
// only the files that changed since. Readers read, hash and compress
// the files a chunk at a time (reads overlap; compression uses every
// core); one writer takes them in order into the pack, the index and the
// trees (treeStack), written as their directories are left.
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

// firstWriter writes the first snapshot of a store in process, for its
// Taker.
type firstWriter struct{ t *Taker }

// canStage reports whether this Take is a first snapshot that can be
// written in process: no snapshot and an empty private index, nothing
// forced in, a system that gives the index its stat data.
func (f *firstWriter) canStage(force []string, indexEntries int) bool {
	return repo.IndexStatKnown && !f.t.Hooks.FirstByGit && f.t.newest.N == 0 && indexEntries == 0 && len(force) == 0
}

// packObjects bounds the objects of one pack of a first snapshot
// (firstPackObjects, unless a test set Hooks.FirstPackObjects).
func (f *firstWriter) packObjects() int {
	if n := f.t.Hooks.FirstPackObjects; n > 0 {
		return n
	}
	return firstPackObjects
}

// stagedFirst is what stageFirst wrote.
type stagedFirst struct {
	tree       string
	files      int            // the files (and links) in the tree
	unreadable []repo.Skipped // the files it could not read (left out, named)
}

// stage writes the first snapshot's objects and private index (see the
// comment at the top) and returns its tree.
func (f *firstWriter) stage(ctx context.Context) (stagedFirst, error) {
	var res stagedFirst
	root, err := os.OpenRoot(f.t.work)
	if err != nil {
		return res, fmt.Errorf("snapshot of %s: %w", f.t.work, err)
	}
	defer root.Close()
	list := f.listUntracked(ctx)
	defer list.close()
	pack, err := repo.NewPackWriter(f.t.repo.Dir(), firstChunk, 256<<10, repo.Compressors{})
	if err != nil {
		return res, err
	}
	defer func() { pack.Abort() }() // the pack of the moment
	index, err := repo.NewIndexWriter(f.t.git.Index())
	if err != nil {
		return res, err
	}
	defer index.Abort()
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
	trees := treeStack{{}}
	var buf []byte
	chunk := make([]string, 0, firstChunk)
	for {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if chunk, err = list.next(chunk[:0]); err != nil {
			return res, err
		}
		if len(chunk) == 0 {
			break
		}
		f.readAhead(roots, chunk, ahead, readers)
		for i, p := range chunk {
			r := &ahead[i]
			if r.skip {
				continue // the walk named it (ReasonGitName, ReasonPathTooLong)
			}
			if p == "" || strings.HasSuffix(p, "/") {
				return res, notFirst("git lists a directory whole", p)
			}
			if err := trees.enter(p[:strings.LastIndexByte(p, '/')+1], root, pack); err != nil {
				return res, err
			}
			if errors.Is(r.err, errReadByWriter) {
				// Too large to read ahead: read it now, alone.
				if r.e, r.st, r.err = f.readForFirst(roots, p, &buf, repo.MaxObjectBytes); r.err == nil {
					r.e.ID, r.err = pack.Add("blob", buf)
				}
			} else if r.err == nil {
				r.err = pack.AddCompressed(r.e.ID, "blob", r.size, r.z)
			}
			switch err := r.err; {
			case errors.Is(err, errNotFirst), errors.Is(err, repo.ErrPackWrite):
				return res, err
			case errors.Is(err, fs.ErrNotExist):
				continue // gone since git listed it
			case err != nil:
				res.unreadable = append(res.unreadable, repo.Skipped{Path: p, Reason: repo.ReasonUnreadable})
				continue
			}
			if err := index.Add(p, r.e.Mode, r.e.ID, r.st); err != nil {
				return res, err
			}
			trees.add(r.e)
			res.files++
		}
		if pack.Len() >= f.packObjects() {
			// A pack's ids and offsets are held until it is written:
			// the next objects go to a new pack.
			if err := pack.Finish(); err != nil {
				return res, err
			}
			if pack, err = repo.NewPackWriter(f.t.repo.Dir(), firstChunk, 256<<10, repo.Compressors{}); err != nil {
				return res, err
			}
		}
	}
	f.t.setStep(StepTree)
	tree, err := trees.finish(pack)
	if err != nil {
		return res, err
	}
	f.t.reach(PointFirstObjects)
	if err := pack.Finish(); err != nil {
		return res, err
	}
	f.t.reach(PointFirstPacked)
	if err := index.Finish(); err != nil {
		return res, err
	}
	res.tree = tree.String()
	return res, nil
}

// untrackedList is `git ls-files -o --exclude-standard -z` read as git
// writes it (its size grows with the tree), in the index's order (git
// sorts it, so each directory's files come together).
type untrackedList struct {
	r    *bufio.Reader
	pipe *io.PipeReader
	done chan struct{} // closed when git has ended
	last string
}

// listUntracked starts git's list of the files git add -A would add
// (the private index is empty). close ends it.
func (f *firstWriter) listUntracked(ctx context.Context) *untrackedList {
	pr, pw := io.Pipe()
	l := &untrackedList{r: bufio.NewReaderSize(pr, 64<<10), pipe: pr, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		_, err := f.t.git.Run(ctx, repo.Call{Args: []string{"ls-files", "-z", "-o", "--exclude-standard"}, InWork: true, Stdout: pw})
		pw.CloseWithError(err)
	}()
	return l
}

// next appends up to firstChunk paths to chunk; none at the end of the
// list. Paths out of order are refused: the tree is written as they come.
func (l *untrackedList) next(chunk []string) ([]string, error) {
	for len(chunk) < firstChunk {
		p, err := l.r.ReadString(0)
		if err == io.EOF && p == "" {
			break
		}
		if err != nil {
			return chunk, fmt.Errorf("snapshot store: listing the files: %w", err)
		}
		p = p[:len(p)-1]
		if l.last != "" && p <= l.last {
			return chunk, notFirst("git listed the files out of order", p)
		}
		l.last = p
		chunk = append(chunk, p)
	}
	return chunk, nil
}

// close stops git if it is still listing (its writes fail) and waits for
// it to end.
func (l *untrackedList) close() {
	l.pipe.Close()
	<-l.done
}

// treeStack writes the trees of a first snapshot as its files come, in
// path order: the directories from the top to the current file's are
// open (the top first); one is written when the files leave it.
type treeStack []treeFrame

// treeFrame is an open directory: its path (with a trailing "/", "" for
// the top) and its entries so far.
type treeFrame struct {
	dir     string
	entries []repo.TreeEntry
}

// enter makes dir (with a trailing "/") the open directory: those left
// are written, those entered are checked to be directories still.
func (t *treeStack) enter(dir string, root *os.Root, pack *repo.PackWriter) error {
	if err := t.closeTo(dir, pack); err != nil {
		return err
	}
	for top := (*t)[len(*t)-1].dir; top != dir; top = (*t)[len(*t)-1].dir {
		next := dir[:len(top)+strings.IndexByte(dir[len(top):], '/')+1]
		if fi, err := root.Lstat(next[:len(next)-1]); err != nil || !fi.IsDir() {
			return notFirst("no longer a directory", next)
		}
		*t = append(*t, treeFrame{dir: next})
	}
	return nil
}

// add adds a file's entry to the open directory.
func (t treeStack) add(e repo.TreeEntry) {
	top := &t[len(t)-1]
	top.entries = append(top.entries, e)
}

// closeTo writes the open directories that do not hold dir, deepest
// first, each into its parent.
func (t *treeStack) closeTo(dir string, pack *repo.PackWriter) error {
	for len(*t) > 1 && !strings.HasPrefix(dir, (*t)[len(*t)-1].dir) {
		top := (*t)[len(*t)-1]
		*t = (*t)[:len(*t)-1]
		if len(top.entries) == 0 {
			continue // nothing in it could be read: git has no directory either
		}
		id, err := pack.Add("tree", repo.EncodeTree(top.entries))
		if err != nil {
			return err
		}
		name := top.dir[:len(top.dir)-1]
		name = name[strings.LastIndexByte(name, '/')+1:]
		t.add(repo.TreeEntry{Name: name, Mode: repo.ModeTree, ID: id})
	}
	return nil
}

// finish writes every open directory and returns the top tree's id
// (the empty tree too: git writes it).
func (t *treeStack) finish(pack *repo.PackWriter) (repo.OID, error) {
	if err := t.closeTo("", pack); err != nil {
		return repo.OID{}, err
	}
	return pack.Add("tree", repo.EncodeTree((*t)[0].entries))
}

// skipByName reports whether git would leave path out for its name: a
// part git takes for .git, or a path too long (the walk names both).
func skipByName(work, p string) bool {
	if len(work)+1+len(p) > repo.MaxPathBytes {
		return true
	}
	for part := range strings.SplitSeq(p, "/") {
		if part == ".git" || repo.IsDotGit(part) {
			return true
		}
	}
	return false
}

// How a first snapshot reads its files: firstReaders goroutines read,
// hash and compress firstChunk files at a time; a file over
// FirstAheadBytes is left to the writer (errReadByWriter), so a chunk
// holds at most firstChunk × FirstAheadBytes of compressed content.
const (
	firstReaders    = 4
	firstChunk      = 128
	FirstAheadBytes = 64 << 10
)

// firstPackObjects bounds the objects of one pack of a first snapshot
// (tests lower it: Hooks.FirstPackObjects): its ids and offsets are held
// until it is written, so a larger tree gets several packs, and memory
// stays bounded however large the tree.
const firstPackObjects = 1 << 18

// errReadByWriter: the file is too large to read ahead.
var errReadByWriter = errors.New("read by the writer")

// firstRead is one file of a first snapshot as a reader left it.
type firstRead struct {
	skip bool // left out for its name
	e    repo.TreeEntry
	st   repo.IndexStat
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
func (f *firstWriter) readAhead(roots *dirRoots, paths []string, out []firstRead, readers []*firstReader) {
	defer roots.closeAll()
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(paths); i = int(next.Add(1) - 1) {
				out[i] = r.read(f, roots, paths[i])
			}
		})
	}
	wg.Wait()
}

// read reads, hashes and compresses one file.
func (r *firstReader) read(f *firstWriter, roots *dirRoots, p string) firstRead {
	if p == "" || strings.HasSuffix(p, "/") {
		return firstRead{} // the writer refuses it
	}
	if skipByName(f.t.work, p) {
		return firstRead{skip: true}
	}
	var res firstRead
	if res.e, res.st, res.err = f.readForFirst(roots, p, &r.buf, FirstAheadBytes); res.err != nil {
		return res
	}
	res.e.ID, res.size = repo.HashObject("blob", r.buf), len(r.buf)
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
// not read: errReadByWriter below repo.MaxObjectBytes, errNotFirst above.
func (f *firstWriter) readForFirst(roots *dirRoots, p string, buf *[]byte, limit int64) (repo.TreeEntry, repo.IndexStat, error) {
	e := repo.TreeEntry{Name: p[strings.LastIndexByte(p, '/')+1:], Mode: repo.ModeFile}
	root, err := roots.of(p)
	if err != nil {
		return e, repo.IndexStat{}, err
	}
	fi, err := root.Lstat(e.Name)
	if err != nil {
		return e, repo.IndexStat{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := root.Readlink(e.Name)
		if err != nil {
			return e, repo.IndexStat{}, err
		}
		st, _ := repo.StatOf(fi)
		e.Mode, *buf = repo.ModeLink, append((*buf)[:0], target...)
		return e, st, nil
	}
	if !fi.Mode().IsRegular() {
		return e, repo.IndexStat{}, notFirst("no longer a file or a link", p)
	}
	file, fi, err := safefile.OpenIn(root, e.Name)
	if errors.Is(err, safefile.ErrNotRegular) || errors.Is(err, safefile.ErrOutside) {
		return e, repo.IndexStat{}, notFirst("changed kind while read", p)
	}
	if err != nil {
		return e, repo.IndexStat{}, err
	}
	defer file.Close()
	if fi.Mode()&0o100 != 0 {
		e.Mode = repo.ModeExec // git keeps the owner's execute bit only
	}
	st, _ := repo.StatOf(fi)
	// What the file holds now, however it changed since the stat (the
	// stat data then no longer matches: git reads it again).
	*buf, err = safefile.ReadAllInto(*buf, file, fi, p, limit)
	switch {
	case errors.Is(err, safefile.ErrTooLarge) && limit < repo.MaxObjectBytes:
		return e, repo.IndexStat{}, errReadByWriter
	case errors.Is(err, safefile.ErrTooLarge):
		return e, repo.IndexStat{}, notFirst("larger than read in process (no size limit set)", p)
	case err != nil:
		return e, repo.IndexStat{}, err
	}
	return e, st, nil
}
