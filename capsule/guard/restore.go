package guard

import (
	"bytes"

	"github.com/continuityd/continuityd/capsule"
	"github.com/continuityd/continuityd/internal/ops"
	"github.com/continuityd/continuityd/internal/termsafe"
)

// RestoreRequest is the body of POST /v1/snapshots/{id}/restore
// (internal/ops declares it with the operation).
type RestoreRequest = ops.RestoreRequest

// DecodeRestoreRequest decodes such a body as strictly as every other body
// (an empty body is an empty request): one JSON object, no duplicate key,
// paths an array of strings (or null), all and dry_run booleans, nothing
// else; all with paths is refused (which is meant?). Refusals name
// the field and the JSON type that arrived, never a Go type.
func DecodeRestoreRequest(body []byte) (*RestoreRequest, error) {
	req := &RestoreRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		switch m.name {
		case "paths":
			if bytes.Equal(bytes.TrimSpace(m.value), []byte("null")) {
				continue // a client's empty list: every path
			}
			els, err := decodeArray(m.value, capsule.CodeInvalidField, m.name)
			if err != nil {
				return nil, err
			}
			for i, el := range els {
				p, err := decodeString(el, capsule.CodeInvalidField, indexPath(m.name, i))
				if err != nil {
					return nil, err
				}
				name, perr := termsafe.ParseExact(p)
				if perr != nil {
					return nil, capsule.Refuse(capsule.CodeInvalidField, indexPath(m.name, i), "%v", perr)
				}
				req.Paths = append(req.Paths, name)
			}
		case "dry_run":
			b, err := decodeBool(m.value, capsule.CodeInvalidField, m.name)
			if err != nil {
				return nil, err
			}
			req.DryRun = b
		case "all":
			b, err := decodeBool(m.value, capsule.CodeInvalidField, m.name)
			if err != nil {
				return nil, err
			}
			req.All = b
		default:
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
	}
	if req.All && len(req.Paths) > 0 {
		return nil, capsule.Refuse(capsule.CodeInvalidField, "all",
			"all restores the whole tree and paths only the paths named: give one of them")
	}
	return req, nil
}

// LostRestoreRequest is the body of POST
// /v1/continuity/work_lost/{id}/restore (internal/ops declares it with the
// operation).
type LostRestoreRequest = ops.LostRestoreRequest

// DecodeLostRestoreRequest decodes such a body as strictly as every other
// body (an empty body is an empty request): dry_run a boolean, nothing
// else.
func DecodeLostRestoreRequest(body []byte) (*LostRestoreRequest, error) {
	req := &LostRestoreRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		if m.name != "dry_run" {
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
		b, err := decodeBool(m.value, capsule.CodeInvalidField, m.name)
		if err != nil {
			return nil, err
		}
		req.DryRun = b
	}
	return req, nil
}

// VersionRestoreRequest is the body of POST /v1/history/restore
// (internal/ops declares it with the operation).
type VersionRestoreRequest = ops.VersionRestoreRequest

// DecodeVersionRestoreRequest decodes such a body as strictly as every
// other body: path a string (in its exact form, as history gives it), at
// an RFC 3339 time or version a history id (one of them), dry_run a
// boolean, nothing else.
func DecodeVersionRestoreRequest(body []byte) (*VersionRestoreRequest, error) {
	req := &VersionRestoreRequest{}
	if err := checkBody(body, MaxBodyBytes); err != nil {
		return nil, err
	}
	ms, _ := readMembers(body)
	for _, m := range ms {
		var err *capsule.Error
		switch m.name {
		case "path":
			var p string
			if p, err = decodeString(m.value, capsule.CodeInvalidField, m.name); err == nil {
				name, perr := termsafe.ParseExact(p)
				if perr != nil {
					return nil, capsule.Refuse(capsule.CodeInvalidField, m.name, "%v", perr)
				}
				req.Path = name
			}
		case "at":
			req.At, err = decodeString(m.value, capsule.CodeInvalidField, m.name)
		case "version":
			req.Version, err = decodeString(m.value, capsule.CodeInvalidField, m.name)
		case "dry_run":
			req.DryRun, err = decodeBool(m.value, capsule.CodeInvalidField, m.name)
		default:
			return nil, unknownField(capsule.CodeUnknownField, "", m.name)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case req.Path == "":
		return nil, capsule.Refuse(capsule.CodeInvalidField, "path", "path is required: the file whose version to restore, relative to the workdir")
	case (req.At == "") == (req.Version == ""):
		return nil, capsule.Refuse(capsule.CodeInvalidField, "at", "give one of at (a time) and version (an id history gives)")
	}
	return req, nil
}
