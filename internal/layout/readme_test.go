package layout

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/config"
	"github.com/continuityd/continuityd/daemon/policy"
)

// The documents state facts about the code: the policy table, the error
// codes, the config keys, the dependencies and the tree. The tests below
// fail when the two disagree, so no document can drift unnoticed.

var update = flag.Bool("update", false, "rewrite the documents' generated blocks (the policy table) from the code")

// root is the module's root, seen from this package's directory (go test
// runs a test in its package's directory).
const root = "../.."

// Where each fact the tests check is written, from the module's root.
const (
	policyDoc = "docs/SNAPSHOTS.md"     // the policy table, under "## Automatic capture"
	configDoc = "docs/CONFIGURATION.md" // the config's tables and keys, under "## Configuration keys"
	errorsDoc = "docs/API.md"           // the error table, after "Every error is"
	treeDoc   = "docs/ARCHITECTURE.md"  // the sections "## Layout" and "## Dependencies"
)

// document is one of the module's Markdown files: its path from the root,
// which every failure names, and its text.
type document struct {
	path, text string
}

func readDoc(t *testing.T, path string) document {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return document{path, string(b)}
}

// section returns the body of the document's section whose "## " heading
// starts with title, up to the next "## " heading.
func (d document) section(t *testing.T, title string) string {
	t.Helper()
	start := strings.Index(d.text, "\n## "+title)
	if start < 0 {
		t.Fatalf("%s has no section %q", d.path, "## "+title)
	}
	body := d.text[start+1:]
	body = body[strings.IndexByte(body, '\n')+1:]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end+1]
	}
	return body
}

// firstFence returns the lines of the first fenced (```) block of text.
func firstFence(t *testing.T, text, where string) []string {
	t.Helper()
	lines := strings.Split(text, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			if start < 0 {
				start = i + 1
				continue
			}
			return lines[start:i]
		}
	}
	t.Fatalf("no fenced block in %s", where)
	return nil
}

// tableAfter returns the rows (cells trimmed, header and separator dropped)
// of the first Markdown table after the first line of the document starting
// with lead.
func (d document) tableAfter(t *testing.T, lead string) [][]string {
	t.Helper()
	i := strings.Index(d.text, "\n"+lead)
	if i < 0 {
		t.Fatalf("%s: no line starting with %q", d.path, lead)
	}
	var rows [][]string
	inTable := false
	for _, l := range strings.Split(d.text[i+1:], "\n")[1:] {
		if !strings.HasPrefix(l, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		t.Fatalf("%s: no table after %q", d.path, lead)
	}
	return rows[2:]
}

var backticked = regexp.MustCompile("`([^`]+)`")

// ---------------------------------------------------------------------------
// 1. The policy table is generated from policy.Table.

const (
	policyBegin = "<!-- policy-table: generated from daemon/policy.Table by `go test ./internal/layout -update` -->"
	policyEnd   = "<!-- /policy-table -->"
)

// TestDocPolicyTable: the policy table (between the markers, under
// "## Automatic capture" in policyDoc) is policy.Table, word for word.
// With -update the test writes it there.
func TestDocPolicyTable(t *testing.T) {
	d := readDoc(t, policyDoc)
	doc := d.text
	begin, end := strings.Index(doc, policyBegin), strings.Index(doc, policyEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s: the policy table must sit between the lines\n%s\nand\n%s\nunder \"## Automatic capture\"", d.path, policyBegin, policyEnd)
	}
	if !strings.Contains(d.section(t, "Automatic capture"), policyBegin) {
		t.Errorf("%s: the policy table is not under \"## Automatic capture\"", d.path)
	}
	got := doc[begin+len(policyBegin) : end]
	want := "\n\n" + policy.Table + "\n"
	if got == want {
		return
	}
	if *update {
		doc = doc[:begin+len(policyBegin)] + want + doc[end:]
		if err := os.WriteFile(filepath.Join(root, filepath.FromSlash(d.path)), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: policy table rewritten from policy.Table", d.path)
		return
	}
	t.Errorf("%s's policy table differs from policy.Table (daemon/policy/doc.go); fix the code's Table if it is wrong, then run `go test ./internal/layout -update`:\n%s",
		d.path, lineDiff(want, got))
}

// lineDiff shows the lines of want missing from got (-) and the lines of got
// missing from want (+): enough to see which row drifted.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range wl {
		if !slices.Contains(gl, l) {
			fmt.Fprintf(&b, "- code:   %s\n", l)
		}
	}
	for _, l := range gl {
		if !slices.Contains(wl, l) {
			fmt.Fprintf(&b, "+ document: %s\n", l)
		}
	}
	if b.Len() == 0 {
		b.WriteString("(same lines, different order or blank lines)\n")
	}
	return b.String()
}

// TestPolicyTableDefaults: policy.Table states the defaults policy really
// has, so that the generated block is right, not just consistent.
func TestPolicyTableDefaults(t *testing.T) {
	c := policy.DefaultConfig()
	rows := map[string][]string{}
	for _, l := range strings.Split(policy.Table, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			continue
		}
		trigger := strings.TrimSpace(cells[1])
		if m := backticked.FindStringSubmatch(trigger); m != nil {
			trigger = m[1]
		}
		rows[trigger] = cells
	}
	var thresholds []string
	for _, f := range c.Thresholds {
		thresholds = append(thresholds, strconv.FormatFloat(f, 'f', -1, 64))
	}
	for trigger, facts := range map[string][]string{
		"quiet": {short(c.Quiet) + " after the last activity", short(c.MaxDelay) + " after its first",
			"`min_interval` " + short(c.MinInterval)},
		"threshold":      {strings.Join(thresholds, ", "), strconv.FormatFloat(c.Hysteresis, 'f', -1, 64) + " below"},
		"pre_compaction": {"`seal_on_compaction`"},
		"session_end":    {"`seal_on_session_end`"},
		"idle":           {short(c.IdleAfter) + " without activity"},
		"refresh":        {"every " + short(c.Refresh), "active within " + short(c.Alive)},
		"hourly cap":     {fmt.Sprintf("3600 / `min_interval` + 10 = %d", c.MaxPerHour())},
	} {
		cells, ok := rows[trigger]
		if !ok {
			t.Errorf("policy.Table has no row %q", trigger)
			continue
		}
		for _, f := range facts {
			if !strings.Contains(cells[2], f) {
				t.Errorf("policy.Table row %q: default column %q does not say %q (policy.DefaultConfig)", trigger, strings.TrimSpace(cells[2]), f)
			}
		}
	}
	if got, want := int(time.Hour/c.MinInterval)+10, c.MaxPerHour(); got != want {
		t.Errorf("the hourly cap is no longer 3600/min_interval + 10 (%d, MaxPerHour says %d): fix the table's formula", got, want)
	}
}

// short writes a duration the way the table and the config file do: 20s,
// 60s, 5m, 24h.
func short(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// ---------------------------------------------------------------------------
// 2. The Configuration section names real tables and keys.

// configSchema is what `continuityd config default` shows: every table
// (as its header is written: [daemon], [[agent]], [upstream.NAME]) and the
// keys of each, set or commented out. A NAME segment stands for any name.
type configSchema struct {
	headers map[string]string          // table name → header as written
	keys    map[string]map[string]bool // table name → its keys
}

var (
	tomlHeader = regexp.MustCompile(`^(?:# )*(\[\[?)([a-z_]+)(?:\.[a-z_]+)?(\]\]?)\s*$`)
	tomlKey    = regexp.MustCompile(`^(?:# )*([a-z_]+) = `)
	// tomlSubtable is a table inside an array entry, one per NAME:
	// [agent.identity.delx] → table "agent.identity".
	tomlSubtable = regexp.MustCompile(`^(?:# )*\[([a-z_]+)\.([a-z_]+)\.[a-z_]+\]\s*$`)
)

// defaultSchema reads the schema off config.DefaultTOML, and checks it
// against the fields of config.Config so that neither hides a key.
func defaultSchema(t *testing.T) configSchema {
	t.Helper()
	s := configSchema{headers: map[string]string{}, keys: map[string]map[string]bool{}}
	table := ""
	for _, l := range strings.Split(string(config.DefaultTOML()), "\n") {
		if m := tomlSubtable.FindStringSubmatch(l); m != nil {
			table = m[1] + "." + m[2]
			s.headers[table] = "[" + table + ".NAME]"
			if s.keys[table] == nil {
				s.keys[table] = map[string]bool{}
			}
			continue
		}
		if m := tomlHeader.FindStringSubmatch(l); m != nil {
			table = m[2]
			h := m[1] + table + m[3]
			if strings.Count(l, ".") > 0 {
				h = m[1] + table + ".NAME" + m[3]
			}
			s.headers[table] = h
			if s.keys[table] == nil {
				s.keys[table] = map[string]bool{}
			}
			continue
		}
		if m := tomlKey.FindStringSubmatch(l); m != nil && table != "" {
			s.keys[table][m[1]] = true
		}
	}

	// The same from the Go types: every toml tag of config.Config.
	fromTypes := map[string]map[string]bool{}
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map || ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		fromTypes[name] = map[string]bool{}
		for j := range ft.NumField() {
			k, _, _ := strings.Cut(ft.Field(j).Tag.Get("toml"), ",")
			if k == "" || k == "-" {
				continue
			}
			// A map of tables inside the table ([agent.identity.NAME]) is
			// a table of its own, not a key.
			if sub := ft.Field(j).Type; sub.Kind() == reflect.Map && sub.Elem().Kind() == reflect.Struct {
				fromTypes[name+"."+k] = map[string]bool{}
				for n := range sub.Elem().NumField() {
					if sk, _, _ := strings.Cut(sub.Elem().Field(n).Tag.Get("toml"), ","); sk != "" && sk != "-" {
						fromTypes[name+"."+k][sk] = true
					}
				}
				continue
			}
			fromTypes[name][k] = true
		}
	}
	if !reflect.DeepEqual(s.keys, fromTypes) {
		t.Fatalf("`continuityd config default` (config/default.toml) and config.Config disagree on the keys:\ndefault.toml: %v\nconfig.Config: %v", s.keys, fromTypes)
	}
	return s
}

// has reports whether a dotted key path (daemon.listen, upstream.qday.rate,
// agent.name) is in the schema.
func (s configSchema) has(path string) bool {
	parts := strings.Split(path, ".")
	keys, ok := s.keys[parts[0]]
	if !ok {
		return false
	}
	if strings.Contains(s.headers[parts[0]], ".NAME") && len(parts) == 3 {
		parts = []string{parts[0], parts[2]} // upstream.qday.rate: any NAME
	}
	return len(parts) == 2 && keys[parts[1]]
}

var (
	tableToken = regexp.MustCompile(`^(\[\[?[a-z_]+(?:\.[A-Za-z_]+){0,2}\]\]?)(?: ([a-z_]+))?$`)
	dottedKey  = regexp.MustCompile(`^[a-z_]+(?:\.[A-Za-z_]+){1,2}$`)
	bareKey    = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// TestDocConfigKeys: the Configuration section (in configDoc) names every
// table the config has, and each table, key or table.key it names in
// backticks is one `continuityd config default` shows; anywhere in the
// documents a backticked table.key of a config table is a real key. A
// renamed key, or a new table the documents leave out, fails here.
func TestDocConfigKeys(t *testing.T) {
	s := defaultSchema(t)
	d := readDoc(t, configDoc)
	sec := d.section(t, "Configuration")
	where := d.path + " Configuration"

	named := map[string]bool{}
	current := "" // the table last named: a bare key belongs to it
	for _, m := range backticked.FindAllStringSubmatch(sec, -1) {
		tok := m[1]
		switch {
		case tableToken.MatchString(tok):
			tm := tableToken.FindStringSubmatch(tok)
			header := tm[1]
			name := strings.Trim(header, "[]")
			if parts := strings.Split(name, "."); len(parts) == 3 {
				// [agent.identity.UPSTREAM]: one table per name.
				name = parts[0] + "." + parts[1]
				header = "[" + name + ".NAME]"
			} else {
				name, _, _ = strings.Cut(name, ".")
			}
			if s.headers[name] != header {
				t.Errorf("%s names the table %s; the config has %s", where, header, orNone(s.headers[name]))
				continue
			}
			named[name] = true
			current = name
			if tm[2] != "" && !s.keys[name][tm[2]] {
				t.Errorf("%s names `%s`: [%s] has no key %q", where, tok, name, tm[2])
			}
		case dottedKey.MatchString(tok):
			if !s.has(tok) {
				t.Errorf("%s names `%s`, which `continuityd config default` does not show", where, tok)
			}
		case bareKey.MatchString(tok):
			if current == "" {
				t.Errorf("%s names `%s` before naming its table", where, tok)
			} else if !s.keys[current][tok] {
				t.Errorf("%s names `%s` under %s, which has no such key", where, tok, s.headers[current])
			}
		}
	}
	for name, header := range s.headers {
		if !named[name] {
			t.Errorf("%s does not mention the table %s", where, header)
		}
	}

	// Everywhere else, a backticked table.key of a config table must be real
	// (`daemon.listen`, `outbox.max_pending`); `decide.because` is no table.
	for _, rel := range markdownFiles(t) {
		for _, m := range backticked.FindAllStringSubmatch(readDoc(t, rel).text, -1) {
			tok := m[1]
			first, _, _ := strings.Cut(tok, ".")
			if _, isTable := s.keys[first]; isTable && dottedKey.MatchString(tok) && !s.has(tok) {
				t.Errorf("%s names `%s`, which `continuityd config default` does not show", rel, tok)
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no such table"
	}
	return s
}

// ---------------------------------------------------------------------------
// 3. The Dependencies list is go.mod's direct requires, each with a reason.

// TestDocDependencies: every direct require of go.mod is named in the
// Dependencies list (in treeDoc) with a reason after " — ", and every module
// the list names is required by go.mod directly. A package path (golang.org/x/time/rate)
// names its module.
func TestDocDependencies(t *testing.T) {
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var mod struct {
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	required := map[string]bool{} // path → direct
	for _, r := range mod.Require {
		required[r.Path] = !r.Indirect
	}

	// Items are "- `a`, `b` — why", continued on indented lines.
	var items []string
	d := readDoc(t, treeDoc)
	where := d.path + " Dependencies"
	for _, l := range strings.Split(d.section(t, "Dependencies"), "\n") {
		switch {
		case strings.HasPrefix(l, "- "):
			items = append(items, l[2:])
		case strings.HasPrefix(l, "  ") && len(items) > 0:
			items[len(items)-1] += " " + strings.TrimSpace(l)
		}
	}
	covered := map[string]bool{}
	for _, item := range items {
		names, why, ok := strings.Cut(item, " — ")
		if !ok || len(strings.Fields(why)) < 3 {
			t.Errorf("%s: %q has no reason (write \"`module` — why it is here\")", where, item)
		}
		ms := backticked.FindAllStringSubmatch(names, -1)
		if len(ms) == 0 {
			t.Errorf("%s: %q names no module in backticks", where, item)
		}
		for _, m := range ms {
			mod := moduleOf(m[1], required)
			if mod == "" {
				t.Errorf("%s names `%s`, which go.mod does not require: remove it from the list", where, m[1])
				continue
			}
			if !required[mod] {
				// Only what the module imports itself belongs in the list;
				// a dependency of a dependency has no reason of ours.
				t.Errorf("%s names `%s`, which go.mod requires only indirectly: remove it from the list", where, m[1])
			}
			covered[mod] = true
		}
	}
	for path, direct := range required {
		if direct && !covered[path] {
			t.Errorf("go.mod requires %s directly, but %s does not say why: add \"- `%s` — …\"", path, where, path)
		}
	}
}

// moduleOf returns the required module that path is or lies in ("" when
// none): the longest one, so that a/b/v2 wins over a/b.
func moduleOf(path string, required map[string]bool) string {
	best := ""
	for m := range required {
		if (path == m || strings.HasPrefix(path, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// ---------------------------------------------------------------------------
// 4. The error table is capsule's codes and statuses.

// codeStatuses returns every refusal code capsule defines (each
// `CodeX = "X"` constant of capsule/errors.go) and the HTTP status it
// travels with: capsule.StatusOf, the one table every refusal takes its
// status from.
func codeStatuses(t *testing.T) map[string]int {
	t.Helper()
	file := filepath.Join(root, "capsule", "errors.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Fatalf("%s: %s is not a string literal", file, n.Name)
				}
				code, _ := strconv.Unquote(lit.Value)
				st := capsule.StatusOf(code)
				if st == 0 {
					t.Fatalf("%s: %s has no status in capsule.StatusOf", file, n.Name)
				}
				codes[code] = st
			}
		}
	}
	if len(codes) == 0 {
		t.Fatalf("%s: no Code constants found", file)
	}
	return codes
}

var (
	upperCode  = regexp.MustCompile("^[A-Z][A-Z0-9_]*$")
	httpStatus = regexp.MustCompile(`\b\d{3}\b`)
)

// TestDocErrorTable: the table under "Every error is" (in errorsDoc) names every code
// capsule defines, only those, each once, with its status. A row gives one
// status for all its codes, or one per code in the same order
// (`400 / 404` for `AGENT_REQUIRED` / `UNKNOWN_AGENT`).
func TestDocErrorTable(t *testing.T) {
	codes := codeStatuses(t)
	d := readDoc(t, errorsDoc)
	rows := d.tableAfter(t, "Every error is")
	seen := map[string]bool{}
	for _, row := range rows {
		if len(row) < 3 {
			t.Errorf("%s error table: row %q needs status | code | when", d.path, row)
			continue
		}
		statuses := httpStatus.FindAllString(row[0], -1)
		var names []string
		for _, m := range backticked.FindAllStringSubmatch(row[1], -1) {
			if upperCode.MatchString(m[1]) {
				names = append(names, m[1])
			}
		}
		if len(statuses) != 1 && len(statuses) != len(names) {
			t.Errorf("%s error table: row %q gives %d statuses for %d codes: give one, or one per code", d.path, row[1], len(statuses), len(names))
			continue
		}
		if strings.TrimSpace(row[2]) == "" {
			t.Errorf("%s error table: row %q does not say when", d.path, row[1])
		}
		for i, name := range names {
			st := statuses[0]
			if len(statuses) > 1 {
				st = statuses[i]
			}
			want, ok := codes[name]
			switch {
			case !ok:
				t.Errorf("%s error table names %s, which capsule does not define", d.path, name)
			case seen[name]:
				t.Errorf("%s error table names %s twice", d.path, name)
			case strconv.Itoa(want) != st:
				t.Errorf("%s error table gives %s status %s; capsule says %d", d.path, name, st, want)
			}
			seen[name] = true
		}
	}
	for code, st := range codes {
		if !seen[code] {
			t.Errorf("%s error table lacks %s (%d), which capsule defines", d.path, code, st)
		}
	}
}

// ---------------------------------------------------------------------------
// 5. The Layout tree names every package, and only paths that exist.

// layoutPaths reads the tree in the Layout block. An entry line
// starts (indented two spaces per level under its parent) with one or more
// paths: the first holds a "/", the others end in "/", and a description
// follows after two or more spaces. Lines indented to the descriptions'
// column (that of the first entry) continue a description; lines whose
// first word holds no "/" are the drawing of the data flow, or prose.
func layoutPaths(t *testing.T, block []string) []string {
	t.Helper()
	descCol := -1
	type level struct {
		indent int
		path   string
	}
	var stack []level
	var paths []string
	for _, l := range block {
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if descCol >= 0 && indent >= descCol {
			continue // a description goes on
		}
		head, rest, described := strings.Cut(l[indent:], "  ")
		toks := strings.Fields(head)
		if len(toks) == 0 || !strings.Contains(toks[0], "/") {
			continue // a blank line, the drawing, prose
		}
		if descCol < 0 && described {
			descCol = indent + len(head) + 2 + len(rest) - len(strings.TrimLeft(rest, " "))
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		parent := ""
		if len(stack) > 0 {
			parent = stack[len(stack)-1].path
		}
		for i, tok := range toks {
			if i > 0 && !strings.HasSuffix(tok, "/") {
				break
			}
			p := strings.TrimSuffix(parent+tok, "/")
			paths = append(paths, p)
			if i == 0 {
				stack = append(stack, level{indent, p + "/"})
			}
		}
	}
	return paths
}

// TestDocLayout: the tree in the Layout block (in treeDoc) names every
// package of the module (`go list ./...`), and every path it names exists.
func TestDocLayout(t *testing.T) {
	d := readDoc(t, treeDoc)
	paths := layoutPaths(t, firstFence(t, d.section(t, "Layout"), d.path+" ## Layout"))
	named := map[string]bool{}
	for _, p := range paths {
		named[p] = true
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s Layout names %s, which does not exist", d.path, p)
		}
	}
	for _, p := range modulePackages(t) {
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue // the module's root package, if it ever has one
		}
		if !named[rel] {
			t.Errorf("%s Layout does not name the package %s/", d.path, rel)
		}
	}
}

// The tree reader must be able to fail: nesting, siblings on one line,
// continuations and drawings are read as the documents write them.
func TestLayoutPaths(t *testing.T) {
	block := []string{
		"sources ──▶ residency ──▶ outbox",
		"  notice   ▲",
		"",
		"cmd/continuityd/      main",
		"daemon/               runtime",
		"  sources/            what the daemon notices, e.g.",
		"                      watch/ (not a path: a continuation)",
		"    watch/            the workdir",
		"  safesocket/ atomicfile/  helpers",
		"    nested/           under safesocket/, the first of the line",
		"docs/PERFORMANCE.md   numbers",
		"the agent's writes ──┘ (API, hooks)",
	}
	got := layoutPaths(t, block)
	want := []string{"cmd/continuityd", "daemon", "daemon/sources", "daemon/sources/watch",
		"daemon/safesocket", "daemon/atomicfile", "daemon/safesocket/nested", "docs/PERFORMANCE.md"}
	if !slices.Equal(got, want) {
		t.Errorf("layoutPaths = %q, want %q", got, want)
	}
}
