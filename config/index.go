package config

import (
	"sort"

	"github.com/pelletier/go-toml/v2/unstable"
)

// keyIndex records where every key of a TOML document is written. go-toml
// positions the errors it finds itself, but not the problems validation finds
// in well-formed values, and its keys lack the index of an [[agent]]; so the
// document is walked once more with go-toml's own parser to map each key
// path (as joinKey spells it) to its position.
type keyIndex struct {
	lines   []int // byte offset at which each line starts
	entries []keyEntry
	first   map[string]int // path → its first entry
	table   string         // the [table] in effect where parsing stopped
}

// keyEntry is one key (or array element) of the document.
type keyEntry struct {
	path       string
	start, end int           // bytes covered: from the key to the end of its value
	kind       unstable.Kind // of the value; Table or ArrayTable for a header
	scalar     bool          // value holds the decoded scalar
	value      string
}

// indexDocument walks data. On a syntax error it stops, keeping what it has
// seen: that is all go-toml could have decoded too.
func indexDocument(data []byte) *keyIndex {
	ix := &keyIndex{lines: []int{0}, first: map[string]int{}}
	for i, c := range data {
		if c == '\n' {
			ix.lines = append(ix.lines, i+1)
		}
	}
	arrays := map[string]int{} // [[array table]] path → tables seen so far
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		expr := p.Expression()
		switch expr.Kind {
		case unstable.Table, unstable.ArrayTable:
			ix.table = ix.header(expr, arrays)
		case unstable.KeyValue:
			ix.keyValue(ix.table, expr)
		}
	}
	return ix
}

// header records a [table] or [[array table]] header and returns the path of
// the table it opens, such as "upstream.qday" or "agent[1]".
func (ix *keyIndex) header(n *unstable.Node, arrays map[string]int) string {
	parts := keyParts(n)
	path := ""
	for i, k := range parts {
		path = joinKey(path, string(k.Data))
		if i < len(parts)-1 {
			r := rangeOf(k.Raw)
			ix.addFirst(keyEntry{path: path, start: r[0], end: r[1], kind: unstable.Table})
			if c, ok := arrays[path]; ok {
				path = indexKey(path, c-1) // [agent.x] extends the latest [[agent]]
			}
			continue
		}
		// The table itself is where its header's key starts, as go-toml
		// reports it: [upstream.qday] is at the "u".
		r := [2]int{rangeOf(parts[0].Raw)[0], rangeOf(k.Raw)[1]}
		if n.Kind != unstable.ArrayTable {
			ix.add(keyEntry{path: path, start: r[0], end: r[1], kind: unstable.Table})
			break
		}
		c := arrays[path]
		arrays[path] = c + 1
		ix.add(keyEntry{path: indexKey(path, c), start: r[0], end: r[1], kind: unstable.Table})
		// Recorded after its first element so that an error go-toml reports
		// at the first header of an unknown [[x]] names "x", not "x[0]".
		ix.addFirst(keyEntry{path: path, start: r[0], end: r[1], kind: unstable.ArrayTable})
		path = indexKey(path, c)
	}
	return path
}

// keyValue records key = value under table, and everything inside the value.
func (ix *keyIndex) keyValue(table string, kv *unstable.Node) {
	parts := keyParts(kv)
	path := table
	for i, k := range parts {
		path = joinKey(path, string(k.Data))
		if i < len(parts)-1 { // a dotted key defines its parent tables
			r := rangeOf(k.Raw)
			ix.addFirst(keyEntry{path: path, start: r[0], end: r[1], kind: unstable.Table})
		}
	}
	v := kv.Value()
	e := keyEntry{path: path, start: rangeOf(parts[0].Raw)[0], end: rangeOf(kv.Raw)[1], kind: v.Kind}
	e.scalar, e.value = scalarOf(v)
	ix.add(e)
	ix.inside(path, v)
}

// inside records the keys of an inline table and the elements of an array.
func (ix *keyIndex) inside(path string, v *unstable.Node) {
	it := v.Children()
	switch v.Kind {
	case unstable.InlineTable:
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				ix.keyValue(path, c)
			}
		}
	case unstable.Array:
		i := 0
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			p := indexKey(path, i)
			i++
			if c.Kind == unstable.Array {
				// A nested array has no Raw to point at: it is placed at
				// its first element, and an empty one not at all.
				if start, ok := firstOffset(c, maxSearchDepth); ok {
					ix.add(keyEntry{path: p, start: start, end: start + 1, kind: c.Kind})
				}
			} else {
				r := rangeOf(c.Raw)
				e := keyEntry{path: p, start: r[0], end: r[1], kind: c.Kind}
				e.scalar, e.value = scalarOf(c)
				ix.add(e)
			}
			ix.inside(p, c)
		}
	}
}

func (ix *keyIndex) add(e keyEntry) {
	if _, ok := ix.first[e.path]; !ok {
		ix.first[e.path] = len(ix.entries)
	}
	ix.entries = append(ix.entries, e)
}

// addFirst records a table only where it first appears: a parent named again
// by a later dotted key or header is not a second definition.
func (ix *keyIndex) addFirst(e keyEntry) {
	if _, ok := ix.first[e.path]; !ok {
		ix.add(e)
	}
}

// maxSearchDepth bounds firstOffset, which is called at every level of a
// nested array: unbounded, a deeply nested document would cost the square
// of its depth. No key of the configuration takes nested arrays at all.
const maxSearchDepth = 4

// firstOffset is where the first element of a (nested) array starts.
func firstOffset(n *unstable.Node, depth int) (int, bool) {
	if depth == 0 {
		return 0, false
	}
	it := n.Children()
	for it.Next() {
		c := it.Node()
		switch c.Kind {
		case unstable.Comment:
			continue
		case unstable.Array:
			if off, ok := firstOffset(c, depth-1); ok {
				return off, true
			}
		default:
			return int(c.Raw.Offset), true
		}
	}
	return 0, false
}

// keyParts lists the parts of a (dotted) key.
func keyParts(n *unstable.Node) []*unstable.Node {
	var parts []*unstable.Node
	it := n.Key()
	for it.Next() {
		parts = append(parts, it.Node())
	}
	return parts
}

func rangeOf(r unstable.Range) [2]int {
	return [2]int{int(r.Offset), int(r.Offset + r.Length)}
}

// scalarOf returns a scalar value as the user wrote it (strings decoded).
func scalarOf(n *unstable.Node) (bool, string) {
	switch n.Kind {
	case unstable.Array, unstable.InlineTable, unstable.Table, unstable.ArrayTable:
		return false, ""
	}
	return true, string(n.Data)
}

// position converts a byte offset into a 1-based line and byte column, the
// way go-toml counts them.
func (ix *keyIndex) position(offset int) (line, col int) {
	i := sort.Search(len(ix.lines), func(i int) bool { return ix.lines[i] > offset }) - 1
	return i + 1, offset - ix.lines[i] + 1
}

// offset converts a go-toml line:column back into a byte offset.
func (ix *keyIndex) offset(line, col int) int {
	if line < 1 || line > len(ix.lines) {
		return -1
	}
	return ix.lines[line-1] + col - 1
}

// find returns the first entry for path.
func (ix *keyIndex) find(path string) (keyEntry, bool) {
	i, ok := ix.first[path]
	if !ok {
		return keyEntry{}, false
	}
	return ix.entries[i], true
}

// locate returns where path is written, or else its closest ancestor that
// is (a key left out is reported at its table); 0, 0 when none is.
func (ix *keyIndex) locate(path string) (line, col int) {
	for p := path; p != ""; p = parentKey(p) {
		if e, ok := ix.find(p); ok {
			return ix.position(e.start)
		}
	}
	return 0, 0
}

// at returns the innermost entry covering offset: for an error go-toml
// reports at a value, the key holding it. Of entries starting at the same
// byte the last recorded wins: the full "a.b" of a dotted key over its "a".
func (ix *keyIndex) at(offset int) (keyEntry, bool) {
	best, found := keyEntry{}, false
	for _, e := range ix.entries {
		if e.start <= offset && offset < max(e.end, e.start+1) && (!found || e.start >= best.start) {
			best, found = e, true
		}
	}
	return best, found
}

// earlier returns the first entry for e's path when it precedes e: a
// duplicate key's original.
func (ix *keyIndex) earlier(e keyEntry) (keyEntry, bool) {
	f, ok := ix.find(e.path)
	if !ok || f.start >= e.start {
		return keyEntry{}, false
	}
	return f, true
}
