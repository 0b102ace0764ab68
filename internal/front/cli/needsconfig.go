package cli

import (
	"fmt"
	"io"
)

// NeedsConfig says, after a command failed on the embedded default, that
// what it asked for (an agent named in the tour, a qday or delx upstream)
// exists only in a configuration file, and shows the lines that make it:
// the embedded default has one agent, shipping to the local archive only.
// kind is the upstream kind the command is about ("qday" or "delx").
func NeedsConfig(w io.Writer, command, kind string) {
	url, token := "https://qdaybunker.fun", "\n    token_env = \"QDAY_TOKEN\""
	if kind == "delx" {
		url, token = "https://api.delx.ai/v1/mcp", "" // its identity comes from delx register
	}
	fmt.Fprintf(w, `continuityd %[1]s needs a config with a %[2]s upstream; the embedded default ships only to the local archive.
See docs/CONFIGURATION.md ("continuityd config default" prints every key). For example, in continuityd.toml:

    [upstream.%[2]s]
    kind = %[2]q
    url = %[3]q%[4]s

    [[agent]]
    name = "builder"
    workdir = "/path/to/your/project"
    upstreams = [%[2]q, "local"]

then: continuityd run --config continuityd.toml   (and pass --config continuityd.toml to this command)
`, command, kind, url, token)
}
