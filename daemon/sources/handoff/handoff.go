// Package handoff reads HANDOFF.md, the note an agent may keep for whoever
// picks up its work, into the sections of a Continuity Capsule: Goal, Done,
// Next, Blockers, Do not, Refuted.
//
// The text of each section is kept as written, never shortened: the
// daemon's capsule guard decides whether it is acceptable, and refuses
// rather than cuts. This package only finds the sections, and takes the
// list marker off a section that is one list item ("## Next\n- swap the
// callsites" is "swap the callsites"): a person's bullet is not part of
// what they wrote.
package handoff

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// Handoff is a parsed HANDOFF.md. A section that is absent is "".
type Handoff struct {
	Goal, Done, Next, Blockers, DoNot, Refuted string
	// Warnings lists what was ignored or merged, one line each, for the
	// agent to fix its file: text before the first heading, unknown
	// headings, repeated sections, an unclosed code fence.
	Warnings []string
}

// Capsule maps the handoff onto a Continuity Capsule v1.
func (h *Handoff) Capsule() capsule.Capsule {
	return capsule.Capsule{
		Version:  "1",
		Goal:     h.Goal,
		Done:     h.Done,
		Next:     h.Next,
		Blockers: h.Blockers,
		DoNot:    h.DoNot,
		Refuted:  h.Refuted,
	}
}

// Errors Parse returns.
var (
	ErrInvalidUTF8 = errors.New("handoff: not valid UTF-8")
	ErrNoSections  = errors.New("handoff: none of the headings Goal, Done, Next, Blockers, Do not, Refuted")
)

// section indexes the known sections, in capsule order.
type section int

const (
	goal section = iota
	done
	next
	blockers
	doNot
	refuted
	nSections
)

// sectionNames maps a normalized heading to its section.
var sectionNames = map[string]section{
	"goal":     goal,
	"done":     done,
	"next":     next,
	"blockers": blockers,
	"do not":   doNot,
	"refuted":  refuted,
}

// Parse reads a HANDOFF.md.
//
// A section starts at an ATX heading ("#" to "######", up to three spaces
// of indent) whose text, ignoring case, a trailing colon, a closing run of
// "#" and with "-" or "_" read as spaces, is one of Goal, Done, Next,
// Blockers, Do not, Refuted: "## Do not:", "# DO NOT" and "### do_not" all
// start the Do not section. Sections may come in any order. A section runs
// until the next heading of any name; lines inside ``` or ~~~ code fences
// are never headings. Setext headings (text underlined with === or ---)
// are not recognized: they are text.
//
// A heading of another name ends the section before it and its text is
// ignored, with a warning, as is text before the first heading. A section
// that appears twice is kept whole: the bodies are joined, in file order,
// with a blank line between them, and a warning says so; joining rather
// than keeping one loses nothing the agent wrote.
//
// Each body is the text exactly as written, less its leading and trailing
// blank lines and its final line break, and less the list marker ("- ",
// "* ", "+ ", "1. ", "1) ") of a body that is a single list item. Parse fails only on invalid UTF-8
// or when none of the known headings is present.
func Parse(md []byte) (*Handoff, error) {
	if !utf8.Valid(md) {
		return nil, ErrInvalidUTF8
	}
	p := &parser{text: strings.TrimPrefix(string(md), "\ufeff"), cur: -1}
	lineNo := 0
	for pos := 0; pos < len(p.text); {
		lineNo++
		line, after := p.lineAt(pos)
		p.line(line, lineNo, pos, after)
		pos = after
	}
	p.closeSection(len(p.text))
	if p.fence.open {
		p.warnings = append(p.warnings, fmt.Sprintf("line %d: code fence never closed; it runs to the end of the file", p.fenceLine))
	}
	if p.preamble {
		p.warnings = append([]string{"text before the first heading is ignored"}, p.warnings...)
	}
	if !p.found {
		return nil, ErrNoSections
	}
	return &Handoff{
		Goal:     p.join(goal),
		Done:     p.join(done),
		Next:     p.join(next),
		Blockers: p.join(blockers),
		DoNot:    p.join(doNot),
		Refuted:  p.join(refuted),
		Warnings: p.warnings,
	}, nil
}

// parser is Parse's state as it goes through the lines of text.
type parser struct {
	text     string
	bodies   [nSections][]string
	warnings []string
	found    bool
	fence    fenceState
	// cur is the section being read; -1 before the first heading and
	// under unknown headings.
	cur       section
	start     int  // where cur's body began in text
	preamble  bool // text before the first heading
	anyHead   bool
	fenceLine int
}

// lineAt returns the line that starts at pos, without its line ending, and
// where the following line starts.
func (p *parser) lineAt(pos int) (line string, after int) {
	end := strings.IndexByte(p.text[pos:], '\n')
	after = len(p.text)
	if end >= 0 {
		end += pos
		after = end + 1
	} else {
		end = len(p.text)
	}
	// Carriage returns at a line's end are line ending (\r\n, or a
	// stray \r an editor left), never text: dropping them all keeps a
	// section the same however it is written back.
	return strings.TrimRight(p.text[pos:end], "\r"), after
}

// line reads one line, number lineNo, which starts at pos in text; after
// is where the following line starts.
func (p *parser) line(line string, lineNo, pos, after int) {
	switch {
	case p.fence.open:
		p.fence.closes(line)
	case p.fence.opens(line):
		p.fenceLine = lineNo
	default:
		if name, ok := atxHeading(line); ok {
			p.heading(name, lineNo, pos, after)
			return
		}
	}
	if !p.anyHead && strings.TrimSpace(line) != "" {
		p.preamble = true
	}
}

// heading ends the section being read and starts the one named, or
// ignores what follows an unknown heading, with a warning.
func (p *parser) heading(name string, lineNo, pos, after int) {
	p.closeSection(pos)
	p.anyHead = true
	if s, known := sectionNames[normalize(name)]; known {
		if len(p.bodies[s]) > 0 {
			p.warnings = append(p.warnings, fmt.Sprintf("line %d: section %q repeated; its texts are joined", lineNo, clip(name)))
		}
		p.found = true
		p.cur, p.start = s, after
		return
	}
	p.warnings = append(p.warnings, fmt.Sprintf("line %d: heading %q is not a handoff section; the text under it is ignored", lineNo, clip(name)))
	p.cur = -1
}

// closeSection keeps the body of the section being read, which ends at end.
func (p *parser) closeSection(end int) {
	if p.cur >= 0 {
		p.bodies[p.cur] = append(p.bodies[p.cur], p.text[p.start:end])
	}
}

// join joins the bodies of a section that appeared more than once, with a
// blank line between them.
func (p *parser) join(s section) string {
	var parts []string
	for _, b := range p.bodies[s] {
		if b = trimBlankLines(b); b != "" {
			parts = append(parts, b)
		}
	}
	return stripSingleItemMarker(strings.Join(parts, "\n\n"))
}

// clip shortens a heading for a warning message (only there: section text
// is never cut).
func clip(s string) string {
	const max = 60
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}
