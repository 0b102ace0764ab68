package watch

import "testing"

func TestMatcher(t *testing.T) {
	type c struct {
		path  string
		isDir bool
		want  bool
	}
	tests := []struct {
		name  string
		files map[string]string
		cases []c
	}{
		{"plain name matches at any depth", map[string]string{"": "foo\n"}, []c{
			{"foo", false, true}, {"a/foo", false, true}, {"a/b/foo", true, true},
			{"foox", false, false}, {"xfoo", false, false}, {"foo/bar", false, true},
		}},
		{"comments blanks and escapes", map[string]string{"": "# comment\n\n\\#hash\n\\!bang\ntrail   \nesc\\ \n"}, []c{
			{"# comment", false, false}, {"#hash", false, true}, {"!bang", false, true},
			{"trail", false, true}, {"trail   ", false, false}, {"esc ", false, true}, {"esc", false, false},
		}},
		{"star and question mark do not cross slashes", map[string]string{"": "*.log\nfile?.txt\n"}, []c{
			{"a.log", false, true}, {"x/y/a.log", false, true}, {"a.logx", false, false},
			{"file1.txt", false, true}, {"file12.txt", false, false}, {"dir/file1.txt", false, true},
		}},
		{"character classes", map[string]string{"": "[abc].c\n[!x]y\n[a-c]z\n"}, []c{
			{"a.c", false, true}, {"d.c", false, false}, {"ay", false, true}, {"xy", false, false},
			{"bz", false, true}, {"dz", false, false},
		}},
		{"negation re-includes", map[string]string{"": "*.log\n!keep.log\n"}, []c{
			{"a.log", false, true}, {"keep.log", false, false}, {"sub/keep.log", false, false},
		}},
		{"last match wins", map[string]string{"": "!keep.log\n*.log\n"}, []c{
			{"keep.log", false, true},
		}},
		{"no re-include inside an excluded directory", map[string]string{"": "build/\n!build/keep.txt\n"}, []c{
			{"build", true, true}, {"build/keep.txt", false, true},
		}},
		{"re-include works when only the contents are excluded", map[string]string{"": "build/*\n!build/keep.txt\n"}, []c{
			{"build", true, false}, {"build/x.o", false, true}, {"build/keep.txt", false, false},
		}},
		{"directory-only pattern", map[string]string{"": "out/\n"}, []c{
			{"out", true, true}, {"out", false, false}, {"a/out", true, true}, {"out/f", false, true},
		}},
		{"anchored pattern", map[string]string{"": "/root.txt\n/gen\n"}, []c{
			{"root.txt", false, true}, {"a/root.txt", false, false}, {"gen", true, true}, {"a/gen", true, false},
		}},
		{"middle slash anchors", map[string]string{"": "doc/frotz\n"}, []c{
			{"doc/frotz", false, true}, {"a/doc/frotz", false, false}, {"doc/frotz/x", false, true},
		}},
		{"leading double star", map[string]string{"": "**/logs\n**/cache/x\n"}, []c{
			{"logs", true, true}, {"a/b/logs", true, true}, {"cache/x", false, true}, {"a/cache/x", false, true},
			{"a/cache/y", false, false},
		}},
		{"trailing double star", map[string]string{"": "abc/**\n"}, []c{
			{"abc", true, false}, {"abc/x", false, true}, {"abc/x/y", false, true}, {"z/abc/x", false, false},
		}},
		{"middle double star", map[string]string{"": "a/**/b\n"}, []c{
			{"a/b", false, true}, {"a/x/b", false, true}, {"a/x/y/b", false, true}, {"a/x/c", false, false},
			{"b", false, false},
		}},
		{"other stars are plain", map[string]string{"": "a**z\n"}, []c{
			{"abcz", false, true}, {"a/z", false, false},
		}},
		{"nested .gitignore applies to its subtree, relative to itself", map[string]string{
			"":    "*.tmpx\n",
			"sub": "/local.txt\n*.gen\n!keep.tmpx\n",
		}, []c{
			{"sub/local.txt", false, true}, {"local.txt", false, false}, {"sub/deeper/local.txt", false, false},
			{"sub/a.gen", false, true}, {"a.gen", false, false},
			{"x.tmpx", false, true}, {"sub/x.tmpx", false, true}, {"sub/keep.tmpx", false, false},
			{"keep.tmpx", false, true},
		}},
		{"deeper file overrides its parent", map[string]string{"": "!*.md\n", "docs": "*.md\n"}, []c{
			{"README.md", false, false}, {"docs/a.md", false, true},
		}},
		{"invalid globs are skipped", map[string]string{"": "[\nok\n"}, []c{
			{"[", false, false}, {"ok", false, true},
		}},
		{"CRLF line endings", map[string]string{"": "a.txt\r\nb/\r\n"}, []c{
			{"a.txt", false, true}, {"b", true, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMatcher(tt.files)
			for _, c := range tt.cases {
				if got := m.Ignored(c.path, c.isDir); got != c.want {
					t.Errorf("Ignored(%q, dir=%v) = %v, want %v", c.path, c.isDir, got, c.want)
				}
			}
		})
	}
}

func TestEditorTemp(t *testing.T) {
	temp := []string{
		"x.go.tmp", "x.go.tmp123", "x.go.tmp.4711.1700000000", ".x.go.tmp-abc", "x.tmp_1",
		".x.go.swp", ".x.go.swo", ".x.swx", "4913", "x.go~", ".#x.go", "#x.go#",
		"x.go___jb_tmp___", "x.go___jb_old___", ".goutputstream-AB12CD", "x.kate-swp",
		".~lock.x.odt#", "~$report.docx", "sedA1b2C3", "tmpab12_xyz", "f.crdownload", "f.part",
	}
	real := []string{
		"x.go", "template.tmpl", "x.tmplate", "tmp", "tmpdir", "sedation", "sediments", ".swp", "main.swp.go",
		"4914", "#x", "notes.txt", "tmp.go", ".tmp",
	}
	for _, n := range temp {
		if !isEditorTemp(n) {
			t.Errorf("isEditorTemp(%q) = false, want true", n)
		}
	}
	for _, n := range real {
		if isEditorTemp(n) {
			t.Errorf("isEditorTemp(%q) = true, want false", n)
		}
	}
}

func BenchmarkIgnoreMatch(b *testing.B) {
	rs := parseRules([]byte("*.log\n/dist\nbuild/\n**/gen/**\n!keep.log\n*.o\n*.a\n.env\ncoverage.out\n"))
	d := &dirInfo{rel: "", rules: rs}
	sub := &dirInfo{rel: "pkg/server", parent: d}
	w := &Watcher{}
	b.ReportAllocs()
	for b.Loop() {
		if w.ignored(sub, "pkg/server/handler.go", false) {
			b.Fatal("ignored")
		}
	}
}
