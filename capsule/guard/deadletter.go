package guard

import (
	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// DeadLetterRequest names the dead letters POST /v1/deadletter/retry and
// /v1/deadletter/discard act on (internal/ops declares it with the
// operations).
type DeadLetterRequest = ops.DeadLetterRequest

// DecodeDeadLetterRequest decodes such a body as strictly as every other
// body: one JSON object, no duplicate key, upstream a non-empty string, seq
// (optional) a whole number, nothing else. Refusals name the field and the
// JSON type that arrived, never a Go type.
func DecodeDeadLetterRequest(body []byte) (*DeadLetterRequest, error) {
	req, err := decodeDeadLetterRequest(body)
	if err != nil {
		return nil, err
	}
	return req, nil
}

func decodeDeadLetterRequest(body []byte) (*DeadLetterRequest, *capsule.Error) {
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	req := &DeadLetterRequest{}
	for _, m := range ms {
		switch m.name {
		case "upstream":
			s, err := decodeString(m.value, capsule.CodeInvalidField, m.name)
			if err != nil {
				return nil, err
			}
			req.Upstream = s
		case "seq":
			n, err := decodeCount(m.value, capsule.CodeInvalidField, m.name)
			if err != nil {
				return nil, err
			}
			req.Seq = uint64(n)
		default:
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
	}
	if req.Upstream == "" {
		return nil, capsule.Refuse(capsule.CodeInvalidField, "upstream",
			`is required: the upstream whose dead letters to act on, e.g. {"upstream":"qday","seq":42} (seq 0 or left out: all)`)
	}
	return req, nil
}
