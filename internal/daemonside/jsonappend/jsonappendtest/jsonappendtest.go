// Package jsonappendtest fills values at random for the tests that hold a
// hand-written encoder (package jsonappend) to encoding/json's output. Every
// exported field is filled, so a field added to a type and forgotten by its
// encoder fails the test.
package jsonappendtest

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"time"
)

// Strings returns the strings Fill picks from: plain ones, and one of
// each kind of character encoding/json escapes or repairs.
func Strings() []string {
	return []string{
		"", "a", "ship the parser fix", "src/main.go", "post:0b4c", "<b>&amp;</b>",
		`say "hi"`, `C:\path`, "tab\there", "line\nbreak", "\x01\x1f\x7f", "café ☕",
		"\u2028\u2029", "bad \xff utf-8", "emoji 🚀 end",
	}
}

// Fill sets every exported field of the value ptr points to, at random:
// pointers nil or set, slices and maps nil, empty or with up to three
// entries, times in and out of UTC, floats that encoding/json writes in
// either of its notations.
func Fill(ptr any, rng *rand.Rand) {
	fill(reflect.ValueOf(ptr).Elem(), rng, 0)
}

func fill(v reflect.Value, rng *rand.Rand, depth int) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(randomTime(rng)))
		return
	case reflect.TypeFor[json.RawMessage]():
		raws := []string{"", `"x"`, `{ "a" : [1, 2] }`, "123", "null"}
		if r := raws[rng.IntN(len(raws))]; r != "" {
			v.SetBytes([]byte(r))
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		ss := Strings()
		v.SetString(ss[rng.IntN(len(ss))])
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if rng.IntN(3) > 0 {
			v.SetInt(rng.Int64N(1<<20) - 1<<10)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if rng.IntN(3) > 0 {
			v.SetUint(rng.Uint64N(1 << 40))
		}
	case reflect.Float32, reflect.Float64:
		fs := []float64{0, 0.5, 1, 0.731, 1e-7, 3e21, 123456789.125}
		v.SetFloat(fs[rng.IntN(len(fs))])
	case reflect.Pointer:
		if depth > 6 || rng.IntN(3) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), rng, depth+1)
		v.Set(p)
	case reflect.Slice:
		switch n := rng.IntN(5); {
		case n == 0 || depth > 6:
		case n == 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				fill(s.Index(i), rng, depth+1)
			}
			v.Set(s)
		}
	case reflect.Map:
		switch n := rng.IntN(5); {
		case n == 0 || depth > 6:
		default:
			m := reflect.MakeMap(v.Type())
			for range n - 1 {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(k, rng, depth+1)
				fill(e, rng, depth+1)
				m.SetMapIndex(k, e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || strings.HasPrefix(f.Tag.Get("json"), "-") {
				continue
			}
			fill(v.Field(i), rng, depth+1)
		}
	}
}

// randomTime is the zero time, a time in UTC with or without nanoseconds,
// or one in a zone east or west of it.
func randomTime(rng *rand.Rand) time.Time {
	base := time.Date(2026, 12, 3, 5, 30, 11, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(400 * 24 * time.Hour))))
	switch rng.IntN(5) {
	case 0:
		return time.Time{}
	case 1:
		return base
	case 2:
		return base.Add(time.Duration(rng.IntN(1e9)))
	case 3:
		return base.In(time.FixedZone("", 5*3600+30*60))
	default:
		return base.Add(time.Duration(rng.IntN(1e6)) * time.Microsecond).In(time.FixedZone("", -8*3600))
	}
}
