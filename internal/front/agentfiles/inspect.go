package agentfiles

import "github.com/continuityd/continuityd/internal/front/agentconf"

// Installed is what of continuityd's one file holds.
type Installed struct {
	Target
	Exists bool
	// Ours: something of continuityd's is in it (uninstall would change it).
	Ours bool
	// Missing says what install would still add ("hooks for PreCompact",
	// "the status line"); none when all of it is there.
	Missing []string
	// Commands are the commands continuityd's entries run.
	Commands []string
}

// Inspect reads the target and says what of continuityd's it holds,
// writing nothing. A file that does not parse is a *FileError.
func Inspect(t Target) (Installed, error) {
	in, err := plan(t, true)
	if err != nil {
		return Installed{}, err
	}
	out, err := plan(t, false)
	if err != nil {
		return Installed{}, err
	}
	read := agentconf.JSONCommands
	if t.Kind == CodexConfig {
		read = agentconf.CodexCommands
	}
	var cmds []string
	if in.Existed {
		if cmds, err = read(in.Before); err != nil {
			return Installed{}, &FileError{t.Path, err}
		}
	}
	i := Installed{Target: t, Exists: in.Existed, Ours: out.Changed(), Commands: cmds}
	if in.Changed() {
		i.Missing = in.Result.Changes
	}
	return i, nil
}
