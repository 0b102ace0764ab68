//go:build !linux

package asowner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/continuityd/continuityd/internal/safefile"
)

// opens is the open requests' socket: none here.
type opens struct{}

func (opens) close() {}

var errNoWorkers = errors.New("owners' workers need Linux")

func (w *Worker) start(uint64) (*process, error) { return nil, errNoWorkers }

// Opener opens nothing here (no worker is ever needed: For says so).
func (w *Worker) Opener() safefile.Opener { return noOpener{} }

type noOpener struct{}

func (noOpener) Open(string, safefile.OpenOptions) (*os.File, fs.FileInfo, error) {
	return nil, nil, errNoWorkers
}

func (noOpener) OpenIn(string, string) (*os.File, fs.FileInfo, error) {
	return nil, nil, errNoWorkers
}

// Main refuses: workers run on Linux only.
func Main(stderr io.Writer) int {
	fmt.Fprintln(stderr, "continuityd-daemon worker:", errNoWorkers)
	return 2
}

// StoreOptions say whose store StoreDir prepares.
type StoreOptions struct {
	StateDir, AgentDir, Agent, Workdir, Old string
	Owner                                   Owner
	Logger                                  *slog.Logger
}

// StoreDir is never needed here (For says no worker is).
func StoreDir(StoreOptions) (string, error) { return "", errNoWorkers }
