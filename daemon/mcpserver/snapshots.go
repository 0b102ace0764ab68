package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The read-only snapshot tools: a restore changes the workdir, so it is
// left to a person (`continuityd snapshot restore`, the API).
var (
	snapshotListDef = definition{
		Name:  "snapshot_list",
		Title: "List work snapshots",
		Description: "List the agent's work snapshots, newest first: id, time, trigger, residency seq, files added/modified/deleted. " +
			"The daemon snapshots the workdir on automatic checkpoints into its own store, never the agent's repository.",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `}}`,
	}
	snapshotDiffDef = definition{
		Name:        "snapshot_diff",
		Title:       "Diff a work snapshot",
		Description: "The unified diff of a work snapshot (default: the newest) against its parent, or against another snapshot; bounded to 1 MiB.",
		Schema: `{"type": "object", "additionalProperties": false, "properties": {` + agentProp + `,
  "id": {"type": "string", "description": "A snapshot id or a unique prefix of 7+ characters; default the newest."},
  "against": {"type": "string", "description": "Another snapshot to compare with; default its parent."}}}`,
	}
)

func (t *tools) snapshotList(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err == nil && len(body) > 0 {
		err = fmt.Errorf("unknown argument; snapshot_list takes agent")
	}
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	return result(t.b.SnapshotList(ctx, c.agent))
}

func (t *tools) snapshotDiff(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctl, body, err := args(req)
	if err != nil {
		return badArgs(err), nil
	}
	c, err := t.decodeControl(ctl, nil, nil)
	if err != nil {
		return badArgs(err), nil
	}
	var id, against string
	for k, v := range body {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return badArgs(fmt.Errorf("argument %q must be a string", k)), nil
		}
		switch k {
		case "id":
			id = s
		case "against":
			against = s
		default:
			return badArgs(fmt.Errorf("unknown argument %q; snapshot_diff takes agent, id and against", k)), nil
		}
	}
	return result(t.b.SnapshotDiff(ctx, c.agent, id, against))
}
