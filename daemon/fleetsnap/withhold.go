package fleetsnap

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/snapshot"
	"github.com/continuityd/continuityd/internal/lazyregexp"
)

// Nothing secret leaves the machine. Before a snapshot is shipped, each
// of its files is checked: well-known credential files (by name, or by
// name and content), the files matching [snapshots] fleet_withhold, and
// every text file in which the secret guard finds a credential are
// withheld. The snapshot then ships as a copy of its commit whose trees
// leave those files out (their blobs are never sent, nor named by a tree
// in the bucket), and whose message and manifest name each withheld file
// and why. The local snapshot stays whole: it never leaves the machine.
// A machine restoring the copy leaves those paths as they are there.

// Secrets finds a credential in a text: the daemon's secret guard
// (capsule/guard). SecretRule returns the rule that matched, or "".
type Secrets interface {
	SecretRule(text string) string
}

// Withholder decides which files of a snapshot stay on the machine. It
// remembers its verdict on each blob's content, so a file is read for
// checking once, whatever the number of snapshots holding it. It is safe
// for concurrent use (the shipper and the work records use one).
type Withholder struct {
	patterns []string
	secrets  Secrets

	mu      sync.Mutex
	verdict map[string]string // blob id + "|" + content class → the reason, "" for none
}

// NewWithholder withholds the well-known credential files, those
// matching patterns (fleet_withhold: a pattern without "/" matches a name
// at any depth, one with "/" a path from the workdir; a match on a
// directory withholds what is under it), and those in which secrets finds
// a credential.
func NewWithholder(patterns []string, secrets Secrets) (*Withholder, error) {
	for i, p := range patterns {
		if err := config.CheckFleetWithhold(p); err != nil {
			return nil, fmt.Errorf("fleet_withhold[%d] %q: %w", i, p, err)
		}
	}
	if secrets == nil {
		return nil, errors.New("fleet snapshots: a Withholder needs the secret guard")
	}
	return &Withholder{patterns: slices.Clone(patterns), secrets: secrets, verdict: map[string]string{}}, nil
}

// sshKeyRE names OpenSSH's private key files (their .pub halves are
// public).
var sshKeyRE = lazyregexp.New(`^id_(rsa|dsa|ecdsa|ed25519)(_sk)?$`)

// byName says why a file is withheld for its path alone, or "".
func (w *Withholder) byName(rel string) string {
	lrel := strings.ToLower(rel)
	base := path.Base(lrel)
	ext := path.Ext(base)
	switch {
	case strings.HasPrefix(base, ".env"):
		return "an environment file (.env*)"
	case sshKeyRE.MatchString(base):
		return "an SSH private key (" + base + ")"
	case ext == ".key" || ext == ".ppk":
		return "a private key file (*" + ext + ")"
	case ext == ".jks" || ext == ".keystore" || ext == ".p12" || ext == ".pfx":
		return "a keystore (*" + ext + ")"
	case base == ".netrc" || base == "_netrc" || base == ".git-credentials" || base == ".pgpass":
		return "a credentials file (" + base + ")"
	case lrel == ".aws/credentials" || strings.HasSuffix(lrel, "/.aws/credentials"):
		return "cloud credentials (.aws/credentials)"
	case inDir(lrel, ".azure"):
		return "cloud credentials (.azure/)"
	case inDir(lrel, ".config/gcloud") || base == "application_default_credentials.json":
		return "cloud credentials (gcloud)"
	}
	for _, p := range w.patterns {
		if matchPattern(p, rel) {
			return "matches [snapshots] fleet_withhold " + strconv.Quote(p)
		}
	}
	return ""
}

// inDir says whether lrel lies in a directory dir (a relative path) at
// any depth.
func inDir(lrel, dir string) bool {
	return strings.HasPrefix(lrel, dir+"/") || strings.Contains(lrel, "/"+dir+"/")
}

// matchPattern matches a fleet_withhold pattern against rel or any
// directory above it.
func matchPattern(p, rel string) bool {
	segs := strings.Split(rel, "/")
	for i := range segs {
		var ok bool
		if strings.Contains(p, "/") {
			ok, _ = path.Match(p, strings.Join(segs[:i+1], "/"))
		} else {
			ok, _ = path.Match(p, segs[i])
		}
		if ok {
			return true
		}
	}
	return false
}

// contentClass is the name-dependent part of a content check: an .npmrc
// or .pypirc is withheld when it holds a token, a JSON file when it
// holds a private key.
func contentClass(rel string) string {
	base := strings.ToLower(path.Base(rel))
	switch {
	case base == ".npmrc" || base == ".pypirc":
		return base
	case path.Ext(base) == ".json":
		return "json"
	}
	return ""
}

// binarySniff is how much of a file decides whether it is text (as git
// decides: a NUL in the first 8000 bytes).
const binarySniff = 8000

// byContent says why a file whose content is data is withheld, or "".
func (w *Withholder) byContent(class string, data []byte) string {
	if bytes.Contains(data, []byte("-----BEGIN ")) && bytes.Contains(data, []byte("PRIVATE KEY-----")) {
		return "holds a private key (-----BEGIN … PRIVATE KEY-----)"
	}
	lower := bytes.ToLower(data)
	switch class {
	case ".npmrc":
		if bytes.Contains(lower, []byte("_authtoken")) || bytes.Contains(lower, []byte("_auth")) || bytes.Contains(lower, []byte("_password")) {
			return "an .npmrc with a token"
		}
	case ".pypirc":
		if bytes.Contains(lower, []byte("password")) || bytes.Contains(lower, []byte("token")) {
			return "a .pypirc with a password or token"
		}
	case "json":
		if bytes.Contains(data, []byte(`"private_key"`)) {
			return "a JSON key file (private_key)"
		}
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		return "" // binary: the guard's rules are for text
	}
	if rule := w.secrets.SecretRule(string(data)); rule != "" {
		return "the secret guard found a credential (rule " + rule + ")"
	}
	return ""
}

// maxVerdicts bounds the verdicts remembered; past it, all are forgotten.
const maxVerdicts = 1 << 20

// treeEntry is one entry of a git tree object.
type treeEntry struct {
	mode, name string
	id         string // hex
}

// Modes of tree entries.
const (
	modeTree    = "40000"
	modeLink    = "120000"
	modeGitlink = "160000"
)

func parseTree(data []byte) ([]treeEntry, error) {
	var out []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp < 0 || nul < sp || len(data) < nul+21 {
			return nil, errors.New("a malformed tree")
		}
		out = append(out, treeEntry{mode: string(data[:sp]), name: string(data[sp+1 : nul]), id: hex.EncodeToString(data[nul+1 : nul+21])})
		data = data[nul+21:]
	}
	return out, nil
}

func encodeTree(ents []treeEntry) []byte {
	var b bytes.Buffer
	for _, e := range ents {
		raw, _ := hex.DecodeString(e.id)
		b.WriteString(e.mode + " " + e.name + "\x00")
		b.Write(raw)
	}
	return b.Bytes()
}

// objectID is git's name of an object: the SHA-1 of "TYPE SIZE\0" and it.
func objectID(typ string, data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", typ, len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// shipment is what goes to the fleet for one snapshot.
type shipment struct {
	commit   string              // the commit shipped: the snapshot's, or its copy
	objects  []snapshot.Object   // commit, root tree, then the trees and blobs it reaches
	made     map[string][]byte   // objects made for the copy (commit and trees), by id
	withheld []snapshot.Withheld // sorted by path
}

// snapshotFiles are a snapshot's commit and trees, read, and its files.
type snapshotFiles struct {
	raw   map[string][]byte // the commit and trees, by id
	files []file
}

type file struct {
	path, mode, id string
}

// read reads the commit and trees of objs (as Store.Objects lists them)
// and walks the root tree.
func read(ctx context.Context, store Store, objs []snapshot.Object) (snapshotFiles, error) {
	var ids []string
	for _, o := range objs {
		if o.Type != "blob" {
			ids = append(ids, o.ID)
		}
	}
	sf := snapshotFiles{raw: make(map[string][]byte, len(ids))}
	err := store.ReadObjects(ctx, ids, func(o snapshot.Object, data []byte) error {
		sf.raw[o.ID] = data
		return nil
	})
	if err != nil {
		return sf, err
	}
	var walk func(tree, prefix string) error
	walk = func(tree, prefix string) error {
		ents, err := parseTree(sf.raw[tree])
		if err != nil {
			return fmt.Errorf("fleet snapshots: tree %s: %w", tree, err)
		}
		for _, e := range ents {
			switch e.mode {
			case modeTree:
				if err := walk(e.id, prefix+e.name+"/"); err != nil {
					return err
				}
			case modeGitlink:
			default:
				sf.files = append(sf.files, file{path: prefix + e.name, mode: e.mode, id: e.id})
			}
		}
		return nil
	}
	return sf, walk(objs[1].ID, "")
}

// check returns the files of sf that stay on the machine, sorted by path.
func (w *Withholder) check(ctx context.Context, store Store, sf snapshotFiles) ([]snapshot.Withheld, error) {
	var out []snapshot.Withheld
	need := map[string][]file{} // blob id → files whose content must be read
	w.mu.Lock()
	for _, f := range sf.files {
		if why := w.byName(f.path); why != "" {
			out = append(out, snapshot.Withheld{Path: f.path, Reason: why})
			continue
		}
		if f.mode == modeLink {
			continue // a link's content is a path
		}
		why, known := w.verdict[f.id+"|"+contentClass(f.path)]
		switch {
		case !known:
			need[f.id] = append(need[f.id], f)
		case why != "":
			out = append(out, snapshot.Withheld{Path: f.path, Reason: why})
		}
	}
	w.mu.Unlock()
	if len(need) > 0 {
		ids := make([]string, 0, len(need))
		for id := range need {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		err := store.ReadObjects(ctx, ids, func(o snapshot.Object, data []byte) error {
			for _, f := range need[o.ID] {
				class := contentClass(f.path)
				why := w.byContent(class, data)
				w.remember(o.ID+"|"+class, why)
				if why != "" {
					out = append(out, snapshot.Withheld{Path: f.path, Reason: why})
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b snapshot.Withheld) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (w *Withholder) remember(key, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.verdict) >= maxVerdicts {
		clear(w.verdict)
	}
	w.verdict[key] = why
}

// Withheld lists the files of snapshot id that shipping it would keep on
// the machine, and why (for the work record).
func (w *Withholder) Withheld(ctx context.Context, store Store, id string) ([]snapshot.Withheld, error) {
	_, objs, err := store.Objects(ctx, id)
	if err != nil {
		return nil, err
	}
	sf, err := read(ctx, store, objs)
	if err != nil {
		return nil, err
	}
	return w.check(ctx, store, sf)
}

// plan decides what ships for the snapshot whose objects are objs: all
// of them when nothing is withheld, else a copy of its commit and of the
// trees above each withheld file, without those files.
func (w *Withholder) plan(ctx context.Context, store Store, objs []snapshot.Object) (shipment, error) {
	sf, err := read(ctx, store, objs)
	if err != nil {
		return shipment{}, err
	}
	withheld, err := w.check(ctx, store, sf)
	if err != nil || len(withheld) == 0 {
		return shipment{commit: objs[0].ID, objects: objs, withheld: withheld}, err
	}
	out := map[string]bool{}
	for _, f := range withheld {
		out[f.Path] = true
	}
	sh := shipment{made: map[string][]byte{}, withheld: withheld}
	var rewrite func(tree, prefix string) (string, int, error)
	rewrite = func(tree, prefix string) (string, int, error) {
		ents, err := parseTree(sf.raw[tree])
		if err != nil {
			return "", 0, err
		}
		kept := ents[:0:0]
		changed := false
		for _, e := range ents {
			p := prefix + e.name
			switch {
			case e.mode == modeTree:
				id, n, err := rewrite(e.id, p+"/")
				if err != nil {
					return "", 0, err
				}
				if n == 0 {
					changed = true
					continue
				}
				changed = changed || id != e.id
				e.id = id
			case out[p]:
				changed = true
				continue
			}
			kept = append(kept, e)
		}
		if !changed {
			return tree, len(kept), nil
		}
		data := encodeTree(kept)
		id := objectID("tree", data)
		sh.made[id] = data
		sf.raw[id] = data
		return id, len(kept), nil
	}
	root, _, err := rewrite(objs[1].ID, "")
	if err != nil {
		return shipment{}, fmt.Errorf("fleet snapshots: %w", err)
	}
	commit, err := copyCommit(sf.raw[objs[0].ID], root, withheld)
	if err != nil {
		return shipment{}, err
	}
	sh.commit = objectID("commit", commit)
	sh.made[sh.commit] = commit
	sh.objects = []snapshot.Object{{ID: sh.commit, Type: "commit"}, {ID: root, Type: "tree"}}
	seen := map[string]bool{sh.commit: true, root: true}
	var list func(tree string)
	list = func(tree string) {
		ents, _ := parseTree(sf.raw[tree]) // parsed above
		for _, e := range ents {
			if e.mode == modeGitlink || seen[e.id] {
				continue
			}
			seen[e.id] = true
			if e.mode == modeTree {
				sh.objects = append(sh.objects, snapshot.Object{ID: e.id, Type: "tree"})
				list(e.id)
			} else {
				sh.objects = append(sh.objects, snapshot.Object{ID: e.id, Type: "blob"})
			}
		}
	}
	list(root)
	return sh, nil
}

// copyCommit is the snapshot's commit with tree root and a line per
// withheld file added to its message.
func copyCommit(raw []byte, root string, withheld []snapshot.Withheld) ([]byte, error) {
	first, rest, ok := bytes.Cut(raw, []byte("\n"))
	if !ok || !bytes.HasPrefix(first, []byte("tree ")) {
		return nil, errors.New("fleet snapshots: a snapshot commit that does not start with its tree")
	}
	head, msg, ok := bytes.Cut(rest, []byte("\n\n"))
	if !ok {
		return nil, errors.New("fleet snapshots: a snapshot commit without a message")
	}
	var b bytes.Buffer
	b.WriteString("tree " + root + "\n")
	b.Write(head)
	b.WriteString("\n\n")
	b.Write(msg)
	if !bytes.HasSuffix(msg, []byte("\n")) {
		b.WriteString("\n")
	}
	if !bytes.Contains(msg, []byte("\n\n")) {
		b.WriteString("\n") // the subject stays one paragraph
	}
	for _, f := range withheld {
		b.WriteString(snapshot.WithheldLine(f))
	}
	return b.Bytes(), nil
}
