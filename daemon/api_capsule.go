package daemon

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/continuityd/continuityd/capsule"
)

// capsuleAnswer is the answer to capsule writes: the sequence number and the
// stored record.
type capsuleAnswer struct {
	Seq     uint64                 `json:"seq"`
	Capsule *capsule.CapsuleRecord `json:"capsule"`
}

// handleCapsuleGet is GET /v1/capsule.
func (d *Daemon) handleCapsuleGet(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	rec := a.store.Capsule()
	if rec == nil {
		writeError(w, capsule.RefuseStatus(http.StatusNotFound, capsule.CodeNoCapsule, "",
			"agent %s has no capsule yet; PUT /v1/capsule stores one, POST /v1/capsule/seal builds one", a.name))
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// handleCapsulePut is PUT /v1/capsule: the published schema, then the
// secret guard, then disk.
func (d *Daemon) handleCapsulePut(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	c, err := st.guard.DecodeCapsule(body)
	if err != nil {
		writeError(w, err)
		return
	}
	seq, err := a.store.PutCapsule(r.Context(), c, false, capsule.OriginExplicit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, capsuleAnswer{Seq: seq, Capsule: a.store.Capsule()})
}

// sealOverrides are the fields a seal request may set on the capsule the
// daemon builds; the rest comes from the residency.
type sealOverrides struct {
	Goal      *string         `json:"goal"`
	Done      *string         `json:"done"`
	Next      *string         `json:"next"`
	Blockers  *string         `json:"blockers"`
	DoNot     *string         `json:"do_not"`
	Refuted   *string         `json:"refuted"`
	Receipts  []string        `json:"receipts"`
	HandoffTo *string         `json:"handoff_to"`
	TTLDays   json.RawMessage `json:"ttl_days"`
}

// handleCapsuleSeal is POST /v1/capsule/seal: build a capsule from the
// current state and receipts (optionally overridden by the body), check it
// like any capsule, and store it sealed.
func (d *Daemon) handleCapsuleSeal(w http.ResponseWriter, r *http.Request, a *agent, st *snapshot) {
	body, berr := readBody(w, r)
	if berr != nil {
		writeError(w, berr)
		return
	}
	var ov sealOverrides
	if len(bytes.TrimSpace(body)) > 0 {
		if !utf8.Valid(body) {
			writeError(w, capsule.Refuse(capsule.CodeInvalidUTF8, "", "the body is not valid UTF-8"))
			return
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ov); err != nil {
			writeError(w, capsule.Refuse(capsule.CodeInvalidCapsule, "", "seal body: %v", err))
			return
		}
		if dec.More() {
			writeError(w, capsule.Refuse(capsule.CodeInvalidJSON, "", "seal body: data after the JSON object"))
			return
		}
	}
	c := capsule.Seal(a.store.Resume(false), a.store.Capsule(), time.Now().UTC())
	ov.apply(c)
	if err := st.guard.CheckCapsule(c); err != nil {
		writeError(w, err)
		return
	}
	seq, err := a.store.PutCapsule(r.Context(), c, true, capsule.OriginExplicit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, capsuleAnswer{Seq: seq, Capsule: a.store.Capsule()})
}

func (o *sealOverrides) apply(c *capsule.Capsule) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.Goal, o.Goal)
	set(&c.Done, o.Done)
	set(&c.Next, o.Next)
	set(&c.Blockers, o.Blockers)
	set(&c.DoNot, o.DoNot)
	set(&c.Refuted, o.Refuted)
	set(&c.HandoffTo, o.HandoffTo)
	if o.Receipts != nil {
		c.Receipts = o.Receipts
	}
	if o.TTLDays != nil {
		c.TTLDays = o.TTLDays
	}
}
