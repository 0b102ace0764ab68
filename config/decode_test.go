package config

import (
	"reflect"
	"strings"
	"testing"
)

// What go-toml refuses (unknown keys, wrong types, syntax) is reported like
// what validation refuses: the key, dotted, at its line:column.
func TestDecodeUnknownKeys(t *testing.T) {
	runErrCases(t, []errCase{
		{"top level", src(`verbose = true`, ``, `[daemon]`, `log_level = "info"`), "verbose", 1, 1, "unknown key; known here: daemon, agent, upstream, guard"},
		{"unknown table", src(`[deamon]`, `socket = "/s"`), "deamon", 1, 2, `unknown table; did you mean "daemon"?`},
		{"in daemon", src(`[daemon]`, `sockt = "/s"`), "daemon.sockt", 2, 1, `unknown key; did you mean "socket"?`},
		{"in second agent", src(`[[agent]]`, `name = "a"`, `[[agent]]`, `name = "b"`, `  upstream = ["local"]`), "agent[1].upstream", 5, 3, `did you mean "upstreams"?`},
		{"in upstream", src(`[upstream.q]`, `kind = "local"`, `password = "x"`), "upstream.q.password", 3, 1, "unknown key; known here: kind, url, token_env, token_file, rate, burst, timeout"},
		{"dotted in upstream", src(`[upstream.q]`, `kind = "local"`, `limits.rate = 1`), "upstream.q.limits.rate", 3, 1, "unknown key"},
		{"sub-table", src(`[daemon.tls]`, `cert = "/c"`), "daemon.tls", 1, 2, "unknown table"},
		{"in inline agent", src(`agent = [{ name = "a" }, { name = "b", x = 1 }]`), "agent[1].x", 1, 40, "unknown key"},
	})
	// Unknown keys do not hide the file's other problems.
	es := decodeErrors(t, src(`[daemon]`, `sockt = "/s"`, `log_level = "loud"`))
	if len(es) != 2 || es[0].Key != "daemon.sockt" || es[1].Key != "daemon.log_level" {
		t.Errorf("got %v", es)
	}
}

func TestDecodeWrongTypes(t *testing.T) {
	runErrCases(t, []errCase{
		{"rate string", src(`[upstream.q]`, `kind = "local"`, `rate = "fast"`), "upstream.q.rate", 3, 1, `must be a number (requests per second) (got "fast")`},
		{"burst float", src(`[upstream.q]`, `kind = "local"`, `burst = 1.5`), "upstream.q.burst", 3, 1, "must be an integer (got 1.5)"},
		{"upstreams string", src(`[[agent]]`, `name = "a"`, `[[agent]]`, `name = "b"`, `upstreams = "qday"`), "agent[1].upstreams", 5, 1, `must be an array of strings (got "qday")`},
		{"upstreams element", src(`[[agent]]`, `name = "a"`, `upstreams = ["local", 7]`), "agent[0].upstreams[1]", 3, 23, "must be a string (got 7)"},
		{"name bool", src(`[[agent]]`, `name = true`), "agent[0].name", 2, 1, "must be a string (got true)"},
		{"duration integer", src(`[daemon]`, `shutdown_timeout = 10`), "daemon.shutdown_timeout", 2, 1, `must be a duration string such as "30s" or "10m" (got 10)`},
		{"daemon not a table", src(`daemon = "x"`), "daemon", 1, 1, `must be a table ([daemon]) (got "x")`},
		{"agent not an array", src(`[agent]`, `name = "a"`), "agent", 1, 2, "must be an array of tables ([[agent]])"},
		{"upstream not a table", src(`[upstream]`, `qday = 1`), "upstream.qday", 2, 1, "must be a table (got 1)"},
		{"url not shown", src(`[upstream.q]`, `url = 12345`), "upstream.q.url", 2, 1, "must be a string (got an integer)"},
		{"domains table", src(`[guard]`, `allowed_link_domains = { a = 1 }`), "guard.allowed_link_domains", 2, 1, "must be an array of strings (got a table)"},
		{"burst overflow", src(`[upstream.q]`, `burst = 99999999999999999999`), "upstream.q.burst", 2, 1, "too large"},
		{"nested array", src(`[[agent]]`, `name = "a"`, `upstreams = ["local", [ "x"]]`), "agent[0].upstreams[1]", 3, 25, "must be a string (got an array)"},
	})
	// All of them at once, not only the first go-toml meets.
	es := decodeErrors(t, src(`[daemon]`, `socket = 1`, `listen = true`))
	if len(es) != 2 || es[0].Key != "daemon.socket" || es[1].Key != "daemon.listen" {
		t.Errorf("got %v", es)
	}
}

// Errors with no position (from defaults) come after those in the file.
func TestErrorOrder(t *testing.T) {
	env := envWith(1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/" + strings.Repeat("s", 200)})
	keys := func(doc string) string {
		_, err := decode([]byte(doc), "f.toml", env)
		var keys []string
		for _, e := range err.(Errors) {
			keys = append(keys, e.Key)
		}
		return strings.Join(keys, " ")
	}
	if got := keys(src(`[guard]`, `allowed_link_domains = ["b", "a"]`, `[upstream.x]`, `kind = "local"`, `kinds = 1`)); got != "guard.allowed_link_domains[0] guard.allowed_link_domains[1] upstream.x.kinds daemon.socket" {
		t.Errorf("order: %s", got)
	}
	// A value of the wrong type stops the checks that depend on values.
	if got := keys(src(`[guard]`, `allowed_link_domains = ["b", "a"]`, `[daemon]`, `log_level = 1`)); got != "daemon.log_level" {
		t.Errorf("after a type error: %s", got)
	}
}

func TestDecodeSyntaxAndDuplicates(t *testing.T) {
	runErrCases(t, []errCase{
		{"missing value", src(`[daemon]`, `log_level = "info"`, `socket = `), "daemon.socket", 3, 10, "invalid TOML"},
		// A syntax error is reported where the syntax breaks, with the key
		// when it can be told.
		{"unterminated string", src(`[[agent]]`, `name = "a`), "agent[0].name", 2, 10, "invalid TOML"},
		{"duplicate key", src(`[daemon]`, `socket = "/a"`, `socket = "/b"`), "daemon.socket", 3, 1, "set twice; first at 2:1"},
		{"duplicate table", src(`[daemon]`, `socket = "/a"`, `[daemon]`, `listen = ""`), "daemon", 3, 2, "set twice; first at 1:2"},
		{"duplicate in second agent", src(`[[agent]]`, `name = "a"`, `[[agent]]`, `name = "b"`, `name = "c"`), "agent[1].name", 5, 1, "set twice; first at 4:1"},
		{"bad duration", src(`[daemon]`, `shutdown_timeout = "10 parsecs"`), "daemon.shutdown_timeout", 2, 1, `must be a duration such as "30s" or "10m" (got "10 parsecs")`},
		{"negative duration", src(`[upstream.q]`, `kind = "local"`, `timeout = "-1s"`), "upstream.q.timeout", 3, 1, `must not be negative (got "-1s")`},
	})
	// A syntax error whose key cannot be told still has its position.
	es := decodeErrors(t, src(`[daemon`, `socket = "/a"`))
	if len(es) != 1 || es[0].Line != 1 || es[0].Key != "" || !strings.HasPrefix(es[0].Msg, "invalid TOML: ") {
		t.Errorf("got %#v", es[0])
	}
}

// keySpecs must describe exactly the keys rawConfig decodes.
func TestKeySpecsMatchRawConfig(t *testing.T) {
	var paths []string
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				p := f.Tag.Get("toml")
				if path != "" {
					p = path + "." + p
				}
				paths = append(paths, p)
				walk(p, f.Type)
			}
		case reflect.Slice:
			paths = append(paths, path+"[]")
			walk(path+"[]", t.Elem())
		case reflect.Map:
			paths = append(paths, path+".*")
			walk(path+".*", t.Elem())
		}
	}
	walk("", reflect.TypeFor[rawConfig]())
	var specs []string
	for _, s := range keySpecs {
		specs = append(specs, s.path)
	}
	if strings.Join(paths, " ") != strings.Join(specs, " ") {
		t.Errorf("rawConfig keys:\n%v\nkeySpecs:\n%v", paths, specs)
	}
}

func TestKeyPaths(t *testing.T) {
	for _, tc := range []struct {
		path, parent, last, schema string
	}{
		{"agent[1].name", "agent[1]", "name", "agent[].name"},
		{"agent[1]", "agent", "[1]", "agent[]"},
		{"upstream.qday.rate", "upstream.qday", "rate", "upstream.*.rate"},
		{`upstream."a.b[0]".rate`, `upstream."a.b[0]"`, "rate", "upstream.*.rate"},
		{`upstream."a.b"`, "upstream", "a.b", "upstream.*"},
		{"daemon", "", "daemon", "daemon"},
	} {
		if got := parentKey(tc.path); got != tc.parent {
			t.Errorf("parentKey(%s) = %s", tc.path, got)
		}
		if got := lastPart(tc.path); got != tc.last {
			t.Errorf("lastPart(%s) = %s", tc.path, got)
		}
		if got := schemaKey(tc.path); got != tc.schema {
			t.Errorf("schemaKey(%s) = %s", tc.path, got)
		}
	}
	if got := joinKey(joinKey("upstream", "a b"), "rate"); got != `upstream."a b".rate` {
		t.Errorf("joinKey = %s", got)
	}
}
