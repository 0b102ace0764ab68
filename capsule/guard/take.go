package guard

import (
	"bytes"
	"strings"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// TakeRequest is the body of POST /v1/snapshots (internal/ops declares it
// with the operation).
type TakeRequest = ops.TakeRequest

// DecodeTakeRequest decodes such a body as strictly as every other body
// (an empty body is an empty request): message a string, nothing else.
// The message is shown in snapshot list and show and kept in the store
// for as long as the snapshot, so it gets the checks of any text the
// daemon keeps: at most ops.MaxTakeMessage characters, one line, no
// control or invisible character, no credential (SECRET_DETECTED naming
// "message", never its value).
func (g *Guard) DecodeTakeRequest(body []byte) (*TakeRequest, error) {
	req := &TakeRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		if m.name != "message" {
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
		s, err := decodeString(m.value, capsule.CodeInvalidField, m.name)
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(s, "\r\n") {
			return nil, capsule.Refuse(capsule.CodeInvalidField, m.name, "is one line: it holds a line break")
		}
		if err := checkText(s, ops.MaxTakeMessage, capsule.CodeInvalidField, m.name); err != nil {
			return nil, err
		}
		if err := g.checkSecret(m.name, s); err != nil {
			return nil, err
		}
		req.Message = s
	}
	return req, nil
}
