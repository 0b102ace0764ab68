package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func defaultPlaces() Places {
	return Places{Adopt: true, Roots: []string{"~"}, MaxWatched: 32, IdleAfter: Duration{8 * time.Hour}}
}

func TestPlacesTable(t *testing.T) {
	c := mustDecode(t, src(
		`[places]`,
		`adopt = false`,
		`roots = ["~/src/", "/srv/work", "~"]`,
		`max_watched = 4`,
		`idle_after = "90m"`,
	))
	want := Places{Adopt: false, Roots: []string{"~/src", "/srv/work", "~"}, MaxWatched: 4, IdleAfter: Duration{90 * time.Minute}}
	if !reflect.DeepEqual(c.Places, want) {
		t.Fatalf("places = %+v, want %+v", c.Places, want)
	}
	if got := c.Places.RootsFor("/home/a"); !reflect.DeepEqual(got, []string{"/home/a/src", "/srv/work", "/home/a"}) {
		t.Errorf("RootsFor(/home/a) = %v", got)
	}
	if got := c.Places.RootsFor(""); !reflect.DeepEqual(got, []string{"/srv/work"}) {
		t.Errorf("RootsFor(no home) = %v: a ~ root without a home must drop out", got)
	}
}

func TestPlacesTableRefusals(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`roots = ["src"]`, "f.toml:2:10: places.roots[0]: must be an absolute path, ~ or start with ~/"},
		{`roots = ["~bob/src"]`, "places.roots[0]: only ~ and ~/"},
		{`max_watched = 0`, "places.max_watched: must be from 1 to 10000"},
		{`idle_after = "10s"`, "places.idle_after: must be from 1m to 8760h"},
		{`adopt = "yes"`, "places.adopt: must be true or false"},
		{`max_wached = 3`, "max_watched"}, // did you mean
	} {
		es := decodeErrors(t, src(`[places]`, tc.doc))
		if !strings.Contains(es.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, es, tc.want)
		}
	}
}

func TestUserFile(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tc := range []struct {
		vars map[string]string
		euid int
		want string
	}{
		{map[string]string{"HOME": "/home/a"}, 1000, "/home/a/.config/continuityd/continuityd.toml"},
		{map[string]string{"HOME": "/home/a", "XDG_CONFIG_HOME": "/cfg"}, 1000, "/cfg/continuityd/continuityd.toml"},
		{map[string]string{"HOME": "/home/a", "XDG_CONFIG_HOME": "rel"}, 1000, "/home/a/.config/continuityd/continuityd.toml"},
		{map[string]string{}, 1000, ""},
		{map[string]string{"HOME": "/root", "XDG_CONFIG_HOME": "/cfg"}, 0, "/etc/continuityd/continuityd.toml"},
	} {
		if got := UserFileFor(env(tc.vars), tc.euid); got != tc.want {
			t.Errorf("UserFileFor(%v, %d) = %q, want %q", tc.vars, tc.euid, got, tc.want)
		}
	}
}
