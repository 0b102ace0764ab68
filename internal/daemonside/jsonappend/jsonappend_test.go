package jsonappend

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/continuityd/continuityd/internal/daemonside/jsonappend/jsonappendtest"
)

// stdEncode is encoding/json's encoding of v in the Writer's mode.
func stdEncode(t *testing.T, v any, escapeHTML bool) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	err := enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), err
}

func TestStringsMatchEncodingJSON(t *testing.T) {
	ss := append(jsonappendtest.Strings(), "\x00", "a\u00e9b", "\u2028", "<script>", "&amp;", "\x7f", "\"\\/")
	for _, escape := range []bool{true, false} {
		for _, s := range ss {
			w := Writer{EscapeHTML: escape}
			w.String(s)
			want, _ := stdEncode(t, s, escape)
			if !bytes.Equal(w.B, want) || w.Err() != nil {
				t.Errorf("escapeHTML %v, %q: got %s (%v), want %s", escape, s, w.B, w.Err(), want)
			}
		}
	}
}

func TestTimesMatchEncodingJSON(t *testing.T) {
	base := time.Date(2026, 12, 3, 5, 30, 11, 123456000, time.UTC)
	times := []time.Time{
		{}, base, base.Truncate(time.Second), base.Add(789),
		base.In(time.FixedZone("", 5*3600+30*60)), base.In(time.FixedZone("", -8*3600)),
		base.In(time.FixedZone("", 3600+30)), // an offset with seconds: written without them
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for _, tm := range times {
		w := Writer{}
		w.Time(tm)
		want, err := json.Marshal(tm)
		if err != nil || !bytes.Equal(w.B, want) || w.Err() != nil {
			t.Errorf("%v: got %s (%v), want %s (%v)", tm, w.B, w.Err(), want, err)
		}
	}
	for _, tm := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		base.In(time.FixedZone("", 24*3600)),
		base.In(time.FixedZone("", -25*3600)),
	} {
		w := Writer{B: []byte("[")}
		w.Time(tm)
		_, wantErr := json.Marshal(tm)
		if w.Err() == nil || wantErr == nil || w.Err().Error() != wantErr.Error() {
			t.Errorf("%v: error %v, encoding/json's %v", tm, w.Err(), wantErr)
		}
		if string(w.B) != "[" {
			t.Errorf("%v: a time that failed left %q behind", tm, w.B)
		}
	}
}

func TestObjectsAndLists(t *testing.T) {
	w := Writer{EscapeHTML: true}
	w.BeginObject()
	w.Key("empty")
	w.Strings([]string{})
	w.Key("none")
	w.Strings(nil)
	w.Key("list")
	w.BeginArray()
	for _, v := range []int64{1, -2} {
		w.Elem()
		w.Int(v)
	}
	w.Elem()
	w.BeginObject()
	w.EndObject()
	w.EndArray()
	w.Key("counts")
	w.StringIntMap(map[string]int{"b": 2, "a<": 1, "c": 3})
	w.Key("nomap")
	w.StringIntMap(nil)
	w.Key("ptr")
	w.StringPtr(nil)
	w.Key("u")
	w.Uint(math.MaxUint64)
	w.Key("f")
	w.Value(1e-7)
	w.Key("yes")
	w.Bool(true)
	w.OmitEmptyString("gone", "")
	w.OmitEmptyString("kept", "k")
	w.IntField("i", -3)
	w.UintField("n", 4)
	w.TimeField("t", time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC))
	w.EndObject()
	want := `{"empty":[],"none":null,"list":[1,-2,{}],"counts":{"a\u003c":1,"b":2,"c":3},"nomap":null,"ptr":null,"u":18446744073709551615,"f":1e-7,"yes":true,"kept":"k","i":-3,"n":4,"t":"2026-12-03T07:00:00Z"}`
	if string(w.B) != want || w.Err() != nil {
		t.Fatalf("got  %s (%v)\nwant %s", w.B, w.Err(), want)
	}
	var v any
	if err := json.Unmarshal(w.B, &v); err != nil {
		t.Fatal(err)
	}
}

func TestValueFailsAsEncodingJSON(t *testing.T) {
	for _, escape := range []bool{true, false} {
		w := Writer{B: []byte("["), EscapeHTML: escape}
		w.Value(math.NaN())
		if w.Err() == nil || string(w.B) != "[" {
			t.Errorf("escapeHTML %v: NaN gave %q, error %v", escape, w.B, w.Err())
		}
		w.Value(json.RawMessage(`{ "a" : "<b>" }`))
		want, _ := stdEncode(t, json.RawMessage(`{ "a" : "<b>" }`), escape)
		if string(w.B) != "["+string(want) {
			t.Errorf("escapeHTML %v: a raw message gave %s, want [%s", escape, w.B, want)
		}
	}
}

// BenchmarkTimes: twenty decisions' worth of time stamps, by the Writer and
// by encoding/json.
func BenchmarkTimes(b *testing.B) {
	ts := make([]time.Time, 20)
	for i := range ts {
		ts[i] = time.Date(2026, 12, 3, 5, 30, i, 123456789, time.UTC)
	}
	b.Run("writer", func(b *testing.B) {
		w := Writer{}
		for b.Loop() {
			w.B = w.B[:0]
			w.BeginArray()
			for _, t := range ts {
				w.Elem()
				w.Time(t)
			}
			w.EndArray()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Marshal(ts)
		}
	})
}
