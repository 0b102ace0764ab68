package handoff

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/continuityd/continuityd/capsule"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name     string
		md       string
		want     Handoff // Warnings compared by count only
		warnings int
	}{
		{
			name: "all sections in capsule order",
			md:   "# Goal\nShip the parser.\n\n## Done\n- tracker\n- tail\n\n## Next\nfuzz it\n\n## Blockers\nnone\n\n## Do not\ntouch go.mod\n\n## Refuted\nsummary lines are compactions\n",
			want: Handoff{Goal: "Ship the parser.", Done: "- tracker\n- tail", Next: "fuzz it", Blockers: "none",
				DoNot: "touch go.mod", Refuted: "summary lines are compactions"},
		},
		{
			name: "any order, case, level, trailing colon, closing hashes",
			md:   "###### REFUTED:\nr\n# DO NOT\nd\n### next ###\nn\n## Goal:\ng\n#### dOnE :\nx\n##### Blockers\nb\n",
			want: Handoff{Goal: "g", Done: "x", Next: "n", Blockers: "b", DoNot: "d", Refuted: "r"},
		},
		{
			name: "do not spellings",
			md:   "## Do-Not\na\n",
			want: Handoff{DoNot: "a"},
		},
		{
			name: "do_not with indent",
			md:   "   ##   do_not  \na\n",
			want: Handoff{DoNot: "a"},
		},
		{
			name: "text kept exactly, blank lines trimmed at the ends only",
			md:   "## Goal\n\n\n  indented first line  \n\n\tsecond paragraph\n   \n\n## Next\nx",
			want: Handoff{Goal: "  indented first line  \n\n\tsecond paragraph", Next: "x"},
		},
		{
			name: "CRLF",
			md:   "## Goal\r\n\r\nline one\r\nline two\r\n\r\n## Next\r\nn\r\n",
			want: Handoff{Goal: "line one\r\nline two", Next: "n"},
		},
		{
			name: "fenced code with heading-like lines",
			md:   "## Next\nRun this:\n```sh\n# not a heading\n## Goal\n```\nthen\n~~~~\n# Done\n~~~\nstill code\n~~~~\n## Done\nok\n",
			want: Handoff{Next: "Run this:\n```sh\n# not a heading\n## Goal\n```\nthen\n~~~~\n# Done\n~~~\nstill code\n~~~~", Done: "ok"},
		},
		{
			name: "inline triple backticks are not a fence",
			md:   "## Next\n```x``` inline\n## Done\nd\n",
			want: Handoff{Next: "```x``` inline", Done: "d"},
		},
		{
			name: "indented code and hashtags are not headings",
			md:   "## Goal\n    # four spaces: code\n#hashtag\n####### seven\n\\# escaped\n## Next\nn\n",
			want: Handoff{Goal: "    # four spaces: code\n#hashtag\n####### seven\n\\# escaped", Next: "n"},
		},
		{
			name:     "unclosed fence runs to the end",
			md:       "## Goal\ng\n```\n## Next\nnot a section\n",
			want:     Handoff{Goal: "g\n```\n## Next\nnot a section"},
			warnings: 1,
		},
		{
			name:     "preamble and unknown headings are ignored with warnings",
			md:       "Handoff for Friday\n\n## Goal\ng\n## Notes\nignored text\n### Next\nn\n# Appendix\nmore ignored\n",
			want:     Handoff{Goal: "g", Next: "n"},
			warnings: 3,
		},
		{
			name:     "duplicate sections are joined",
			md:       "## Done\nfirst\n## Next\nn\n## done\n\nsecond\n\n## DONE:\n\n",
			want:     Handoff{Done: "first\n\nsecond", Next: "n"},
			warnings: 2,
		},
		{
			name: "empty sections",
			md:   "## Goal\n## Next\n\n",
			want: Handoff{},
		},
		{
			name: "byte order mark and no final newline",
			md:   "\ufeff# Goal\ng",
			want: Handoff{Goal: "g"},
		},
		{
			name: "heading with inline text is another heading",
			md:   "## Goal: ship it\nx\n## Goal\ny\n",
			want: Handoff{Goal: "y"}, warnings: 1,
		},
		{
			name: "long text is never cut",
			md:   "## Goal\n" + strings.Repeat("é", 10000) + "\n",
			want: Handoff{Goal: strings.Repeat("é", 10000)},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := Parse([]byte(c.md))
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Warnings) != c.warnings {
				t.Errorf("warnings = %q, want %d", h.Warnings, c.warnings)
			}
			got := *h
			got.Warnings = nil
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %#v\nwant %#v", got, c.want)
			}
		})
	}
}

func TestParseWarningsText(t *testing.T) {
	h, err := Parse([]byte("intro\n## Goal\ng\n## Notes\nx\n## Goal\nh\n```\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"text before the first heading is ignored",
		`line 4: heading "Notes" is not a handoff section; the text under it is ignored`,
		`line 6: section "Goal" repeated; its texts are joined`,
		"line 8: code fence never closed; it runs to the end of the file",
	}
	if !reflect.DeepEqual(h.Warnings, want) {
		t.Errorf("warnings\n got %q\nwant %q", h.Warnings, want)
	}
	if h.Goal != "g\n\nh\n```" {
		t.Errorf("goal = %q", h.Goal)
	}
}

func TestParseErrors(t *testing.T) {
	for _, md := range []string{"", "\n\n", "just text\n", "## Notes\nx\n", "```\n## Goal\n```\n", "##Goal\n", "    ## Goal\n"} {
		if _, err := Parse([]byte(md)); !errors.Is(err, ErrNoSections) {
			t.Errorf("%q: %v", md, err)
		}
	}
	if _, err := Parse([]byte("## Goal\n\xff\n")); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

func TestCapsule(t *testing.T) {
	h := &Handoff{Goal: "g", Done: "d", Next: "n", Blockers: "b", DoNot: "x", Refuted: "r", Warnings: []string{"w"}}
	want := capsule.Capsule{Version: "1", Goal: "g", Done: "d", Next: "n", Blockers: "b", DoNot: "x", Refuted: "r"}
	if got := h.Capsule(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}

// A handoff written in a person's style: a section that is one bullet
// loses its marker, a section of several bullets keeps them all.
func TestParseSingleItemListMarker(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"dash", "- swap the callsites", "swap the callsites"},
		{"star", "* swap the callsites", "swap the callsites"},
		{"plus", "+ swap the callsites", "swap the callsites"},
		{"numbered dot", "1. swap the callsites", "swap the callsites"},
		{"numbered paren", "12) swap the callsites", "swap the callsites"},
		{"indented, tab after marker", "  -\tswap the callsites", "swap the callsites"},
		{"continuation kept", "- swap the callsites\n  then run the tests", "swap the callsites\n  then run the tests"},
		{"two items kept", "- swap the callsites\n- run the tests", "- swap the callsites\n- run the tests"},
		{"numbered list kept", "1. a\n2. b", "1. a\n2. b"},
		{"text kept", "-not a bullet", "-not a bullet"},
		{"negative number kept", "-3 degrees", "-3 degrees"},
		{"version kept", "1.2 is out", "1.2 is out"},
		{"lone dash kept", "-", "-"},
		{"prose then bullet kept", "do this:\n- swap", "do this:\n- swap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := Parse([]byte("## Next\n" + c.body + "\n\n## Goal\n- ship it\n"))
			if err != nil {
				t.Fatal(err)
			}
			if h.Next != c.want {
				t.Errorf("Next = %q, want %q", h.Next, c.want)
			}
			if h.Goal != "ship it" {
				t.Errorf("Goal = %q, want %q", h.Goal, "ship it")
			}
		})
	}
}
