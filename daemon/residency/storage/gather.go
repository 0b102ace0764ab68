package storage

// How a batch is taken: the ops waiting when a commit begins, after the
// writers already running had a few turns to submit theirs.

// maxGatherYields bounds how long gather waits: a few turns of the
// scheduler, microseconds, never a timer.
const maxGatherYields = 8

// gather lets the writers already running submit their ops before a batch
// is taken, when the last batch carried several: writers that arrive
// together then share a batch and its sync rather than each following
// batch taking one or two, so the machine pays fewer syncs for as many
// writes (16 writers from another process: +3-8%, measured paired in
// docs/PERFORMANCE.md). It yields until as many ops wait as the last batch
// took, at most maxGatherYields times. A lone writer (the last batch held
// one op) never waits. The caller holds commitMu and has taken one op.
func (e *Engine[T]) gather() {
	for i := 0; i < maxGatherYields && e.lastWrites > 1 && len(e.ops) < e.lastWrites-1; i++ {
		e.yield()
	}
}

func (e *Engine[T]) fill(batch *[]*Op[T]) {
	for len(*batch) < maxBatch {
		select {
		case o := <-e.ops:
			*batch = append(*batch, o)
		default:
			return
		}
	}
}
