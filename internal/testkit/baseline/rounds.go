package baseline

import "testing"

// Rounds gathers a "16 concurrent writers vs 1" benchmark, ours beside the
// bare group commit: each round measures the four phases interleaved (so
// all see the same disk), and Report quotes the medians over the rounds,
// with every ratio taken within a round.
type Rounds struct {
	one, sixteen, ratio             []float64
	bareOne, bareSixteen, bareRatio []float64
	ofBare                          []float64

	commits, writes, bareCommits, bareWrites int64
}

// Add records one round's throughputs (writes per second).
func (r *Rounds) Add(one, sixteen, bareOne, bareSixteen float64) {
	r.one, r.sixteen, r.ratio = append(r.one, one), append(r.sixteen, sixteen), append(r.ratio, sixteen/one)
	r.bareOne, r.bareSixteen, r.bareRatio = append(r.bareOne, bareOne), append(r.bareSixteen, bareSixteen), append(r.bareRatio, bareSixteen/bareOne)
	r.ofBare = append(r.ofBare, (sixteen/one)/(bareSixteen/bareOne))
}

// AddCommits records the commits made during one round's 16-writer phases
// and the writes they held, ours and the bare group commit's.
func (r *Rounds) AddCommits(commits, writes, bareCommits, bareWrites int64) {
	r.commits, r.writes = r.commits+commits, r.writes+writes
	r.bareCommits, r.bareWrites = r.bareCommits+bareCommits, r.bareWrites+bareWrites
}

// Report adds the figures to b's output as custom metrics.
func (r *Rounds) Report(b *testing.B) {
	b.ReportMetric(Median(r.one), "1-writer-writes/s")
	b.ReportMetric(Median(r.sixteen), "16-writers-writes/s")
	b.ReportMetric(Median(r.ratio), "ratio")
	b.ReportMetric(float64(r.writes)/float64(max(r.commits, 1)), "16-writers-writes/commit")
	b.ReportMetric(Median(r.bareOne), "groupcommit-1-writer-writes/s")
	b.ReportMetric(Median(r.bareSixteen), "groupcommit-16-writers-writes/s")
	b.ReportMetric(Median(r.bareRatio), "groupcommit-ratio")
	b.ReportMetric(float64(r.bareWrites)/float64(max(r.bareCommits, 1)), "groupcommit-16-writers-writes/commit")
	b.ReportMetric(Median(r.ofBare), "ratio-of-groupcommit")
}
