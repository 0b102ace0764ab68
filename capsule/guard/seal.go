package guard

import (
	"bytes"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
)

// SealRequest is the body of POST /v1/capsule/seal (internal/ops declares
// it with the operation).
type SealRequest = ops.SealRequest

// DecodeSealRequest decodes such a body as strictly as every other body
// (an empty body is an empty request): one JSON object, no duplicate key,
// the text fields strings (or null), receipts an array of strings (or
// null), ttl_days left to the capsule's schema, nothing else (INVALID_CAPSULE
// names the field). Refusals name the field and the JSON type that
// arrived, never a Go type.
func DecodeSealRequest(body []byte) (*SealRequest, error) {
	req, err := decodeSealRequest(body)
	if err != nil {
		return nil, err
	}
	return req, nil
}

// sealCode is the code of a seal body's refusals: its fields are the
// capsule's, so a bad one is an invalid capsule, as a bad PUT /v1/capsule is.
const sealCode = capsule.CodeInvalidCapsule

func decodeSealRequest(body []byte) (*SealRequest, *capsule.Error) {
	req := &SealRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	texts := map[string]**string{
		"goal": &req.Goal, "done": &req.Done, "next": &req.Next, "blockers": &req.Blockers,
		"do_not": &req.DoNot, "refuted": &req.Refuted, "handoff_to": &req.HandoffTo,
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		isNull := jsonKind(m.value) == "null"
		if dst, ok := texts[m.name]; ok {
			if isNull {
				continue
			}
			s, err := decodeString(m.value, sealCode, m.name)
			if err != nil {
				return nil, capsule.Refuse(sealCode, m.name, "must be a string or null, got %s", jsonKind(m.value))
			}
			*dst = &s
			continue
		}
		switch m.name {
		case "receipts":
			if isNull {
				continue
			}
			els, err := decodeArray(m.value, sealCode, m.name)
			if err != nil {
				return nil, err
			}
			req.Receipts = make([]string, 0, len(els))
			for i, el := range els {
				s, err := decodeString(el, sealCode, indexPath(m.name, i))
				if err != nil {
					return nil, err
				}
				req.Receipts = append(req.Receipts, s)
			}
		case "ttl_days":
			if isNull {
				continue
			}
			if hugeExponent(m.value) {
				return nil, ttlOutOfRange()
			}
			req.TTLDays = bytes.Clone(m.value)
		default:
			return nil, unknownField(sealCode, "", m.name)
		}
	}
	return req, nil
}
