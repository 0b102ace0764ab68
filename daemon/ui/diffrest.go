package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/continuityd/continuityd/internal/ops"
)

// restCache keeps, for a short while, the diffs the changes view just
// parsed, so that the rest of each file, which the page's script asks
// for right after the view is shown, costs no second diff. An entry is
// only reused by the session that made it (its CSRF token is part of the
// key), for restTTL; at most restEntries are kept.
type restCache struct {
	mu sync.Mutex
	m  map[string]restEntry
}

type restEntry struct {
	files []fileDiff
	at    time.Time
}

const (
	restTTL     = time.Minute
	restEntries = 8
)

func restKey(ctx context.Context, agent, id, against string) string {
	return sessionOf(ctx).csrf + "\x00" + agent + "\x00" + id + "\x00" + against
}

// put keeps a copy of files (each file's lines whole: the view holds back
// its own copy afterwards).
func (c *restCache) put(ctx context.Context, agent, id, against string, files []fileDiff) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, e := range c.m {
		if now.Sub(e.at) > restTTL {
			delete(c.m, k)
		}
	}
	if c.m == nil || len(c.m) >= restEntries {
		c.m = map[string]restEntry{}
	}
	c.m[restKey(ctx, agent, id, against)] = restEntry{files: slices.Clone(files), at: now}
}

func (c *restCache) get(ctx context.Context, agent, id, against string) ([]fileDiff, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[restKey(ctx, agent, id, against)]
	if !ok || time.Since(e.at) > restTTL {
		return nil, false
	}
	return e.files, true
}

// restAnswer is the rest of one file's diff for the page's script: its
// lines as HTML (escaped and redacted as in the view), in blocks of
// diffChunk lines, which the script lays out as they come into view.
type restAnswer struct {
	Lines      int      `json:"lines"`
	ChunkLines int      `json:"chunkLines"`
	Chunks     []string `json:"chunks"`
}

// diffRest answers the rest of one file's diff (?file=N&from=L, with the
// file's path when git did not quote it): from the diff the view just
// parsed for this session, else asked for again (the file's own diff by
// its path, or the whole diff and its N-th file).
func (s *Server) diffRest(w http.ResponseWriter, r *http.Request) {
	name, id, q := r.PathValue("agent"), r.PathValue("id"), r.URL.Query()
	n, err1 := strconv.Atoi(q.Get("file"))
	from, err2 := strconv.Atoi(q.Get("from"))
	if err1 != nil || err2 != nil || n < 0 || from < 0 {
		s.refuse(w, r, http.StatusBadRequest, "INVALID_QUERY", "file and from must be whole numbers, at least 0")
		return
	}
	against := q.Get("against")
	files, ok := s.rests.get(r.Context(), name, id, against)
	if !ok {
		dq := agentQuery(name)
		if against != "" {
			dq.Set("against", against)
		}
		if p := q.Get("path"); p != "" {
			dq.Set("path", p)
			n = 0
		}
		diff, err := call(r.Context(), s, ops.SnapshotDiff, ops.Args{ID: id, Query: dq})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		files, _ = parseDiff(diff, false)
	}
	var lines []diffLine
	if n < len(files) && from < len(files[n].Lines) {
		lines = files[n].Lines[from:]
	}
	ans := restAnswer{Lines: len(lines), ChunkLines: diffChunk}
	for i := 0; i < len(lines); i += diffChunk {
		ans.Chunks = append(ans.Chunks, string(linesHTML(lines[i:min(i+diffChunk, len(lines))], false)))
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // the chunks are HTML: escaped, they would be a sixth longer
	enc.Encode(ans)
}
