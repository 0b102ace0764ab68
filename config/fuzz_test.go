package config

import (
	"errors"
	"reflect"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// FuzzDecode: Decode never panics, every refusal is Errors with a message,
// and an accepted configuration survives a trip through toml.Marshal
// unchanged (so `config check` on a generated file agrees with the daemon).
// The seed corpus is testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Add(DefaultTOML()) // the current one, should the corpus copy lag behind an edit
	f.Fuzz(func(t *testing.T, data []byte) {
		env := testEnv()
		c, err := decode(data, "fuzz.toml", env)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			for _, e := range es {
				if e.Msg == "" || e.File != "fuzz.toml" {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		out, err := toml.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := decode(out, "marshalled.toml", env)
		if err != nil {
			t.Fatalf("the marshalled config is refused: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(c, again) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v\n%s", c, again, out)
		}
	})
}
