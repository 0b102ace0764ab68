package ledgers

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/continuityd/continuityd/daemon/attribution"
)

// BenchmarkLedgerSave: what a write of a workdir's attribution ledger
// costs after a 5-path burst, as the ledger grows (paths it holds), beside
// the least the burst's own change needs in the same run: its 5 changes
// as JSON written to a file and fsynced. A write appends what changed to
// the ledger's journal, and the ledger is written whole when the journal
// outgrows it (journalExt): the cost follows the change, not what the
// ledger holds (up to attribution.DefaultMaxPaths). ledger-KiB is the
// size of the file written whole.
//
//	go test -run '^$' -bench LedgerSave ./daemon/attribution/ledgers/
func BenchmarkLedgerSave(b *testing.B) {
	for _, paths := range []int{100, 2000, 20000} {
		b.Run(fmt.Sprint("paths=", paths), func(b *testing.B) {
			dir := b.TempDir()
			l := Set{}
			l.KeepIn(dir, slog.New(slog.DiscardHandler))
			lg := l.For("/srv/work")
			at := time.Now()
			for i := 0; i < paths; i += 500 {
				batch := make([]string, 0, 500)
				for k := i; k < min(i+500, paths); k++ {
					batch = append(batch, fmt.Sprintf("pkg%03d/file%05d.go", k/100, k))
				}
				if _, err := lg.Burst(attribution.Burst{Paths: batch, At: at}); err != nil {
					b.Fatal(err)
				}
			}
			l.Save()
			raw, err := os.OpenFile(filepath.Join(dir, "raw"), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			var ours, base time.Duration
			b.ResetTimer()
			for n := range b.N {
				burst := make([]string, 5)
				for k := range burst {
					burst[k] = fmt.Sprintf("pkg%03d/file%05d.go", (n*5+k)%paths/100, (n*5+k)%paths)
				}
				at = at.Add(time.Second)
				if _, err := lg.Burst(attribution.Burst{Paths: burst, At: at}); err != nil {
					b.Fatal(err)
				}
				t := time.Now()
				l.Save()
				ours += time.Since(t)
				change := fmt.Appendf(nil, `{"at":%q,"paths":%q,"kind":"outside"}`+"\n", at.Format(time.RFC3339Nano), burst)
				t = time.Now()
				if _, err := raw.WriteAt(change, 0); err != nil {
					b.Fatal(err)
				}
				if err := raw.Sync(); err != nil {
					b.Fatal(err)
				}
				base += time.Since(t)
			}
			b.StopTimer()
			fi, err := os.Stat(l.file(workdirKey("/srv/work")))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(ours.Microseconds())/float64(b.N)/1000, "save-ms")
			b.ReportMetric(float64(base.Microseconds())/float64(b.N)/1000, "change-fsync-ms")
			b.ReportMetric(float64(ours)/float64(base), "ratio")
			b.ReportMetric(float64(fi.Size())/1024, "ledger-KiB")
		})
	}
}
