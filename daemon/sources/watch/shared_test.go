package watch

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/goleak"
)

// sharedSub is one subscriber of a Shared, recording what it is told.
type sharedSub struct {
	t   *testing.T
	sub *Subscription

	mu      sync.Mutex
	sums    []Summary
	git     []string
	stopped []error
}

func subscribe(t *testing.T, s *Shared, root string, o Options) *sharedSub {
	t.Helper()
	o.Root = root
	if o.Quiet == 0 {
		o.Quiet = testQuiet
	}
	r := &sharedSub{t: t}
	sub, err := s.Subscribe(o, Subscriber{
		Summary:  func(sum Summary) { r.mu.Lock(); r.sums = append(r.sums, sum); r.mu.Unlock() },
		GitEvent: func(dir string) { r.mu.Lock(); r.git = append(r.git, dir); r.mu.Unlock() },
		Stopped:  func(err error) { r.mu.Lock(); r.stopped = append(r.stopped, err); r.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.sub = sub
	t.Cleanup(sub.Close)
	select {
	case <-sub.Watcher().Ready():
	case <-time.After(60 * time.Second):
		t.Fatal("shared watcher not ready after 60 s")
	}
	return r
}

func (r *sharedSub) summaries() []Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sums)
}

// saw reports whether some summary listed p (and was Rescanned, when
// rescanned is set).
func (r *sharedSub) saw(p string, rescanned bool) bool {
	for _, s := range r.summaries() {
		if slices.Contains(s.Paths, p) && (s.Rescanned || !rescanned) {
			return true
		}
	}
	return false
}

func (r *sharedSub) sawGit(dir string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.git, dir)
}

// TestSharedFansOutEveryBurst: two subscribers on one work directory
// share one Watcher (one set of watches) and each is told every burst,
// every git event and an overflow's rescan.
func TestSharedFansOutEveryBurst(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "a/b/c.txt"), "x")
	mustWrite(t, filepath.Join(root, ".git/HEAD"), "ref: refs/heads/main\n")
	if err := os.MkdirAll(filepath.Join(root, ".git/refs/heads"), 0o755); err != nil {
		t.Fatal(err)
	}
	var s Shared
	one := subscribe(t, &s, root, Options{})
	two := subscribe(t, &s, root, Options{})
	if one.sub.Watcher() != two.sub.Watcher() || s.Watcher() != one.sub.Watcher() {
		t.Fatal("two subscribers on one work directory got two Watchers")
	}
	// root, a, a/b, .git, .git/refs, .git/refs/heads: one watch each, once.
	if n := one.sub.Watcher().Stats().WatchedDirs; n != 6 {
		t.Fatalf("WatchedDirs = %d, want 6", n)
	}

	mustWrite(t, filepath.Join(root, "a/b/new.txt"), "y")
	waitFor(t, 60*time.Second, "the burst told to both", func() bool { return one.saw("a/b/new.txt", false) && two.saw("a/b/new.txt", false) })

	mustWrite(t, filepath.Join(root, ".git/refs/heads/main"), "0123456789012345678901234567890123456789\n")
	w := one.sub.Watcher()
	waitFor(t, 60*time.Second, "the git event told to both", func() bool { return one.sawGit(w.Root()) && two.sawGit(w.Root()) })

	// An overflow: the rescan (and its Summary that cannot vouch for the
	// tree) reaches both, so both snapshot stores add the whole tree.
	mustWrite(t, filepath.Join(root, "after-overflow.txt"), "z")
	w.injectErr <- fsnotify.ErrEventOverflow
	waitFor(t, 60*time.Second, "the rescan told to both", func() bool {
		return one.saw("after-overflow.txt", true) && two.saw("after-overflow.txt", true)
	})
	for _, r := range []*sharedSub{one, two} {
		for _, sum := range r.summaries() {
			if sum.Rescanned && sum.Complete {
				t.Fatalf("a rescanned summary vouches for the tree: %+v", sum)
			}
		}
	}
}

// TestSharedCloseKeepsOthersLastStops: a subscriber that closes is told
// nothing more while the others go on; the last Close stops the Watcher
// and its goroutines, and a later subscriber starts a new one.
func TestSharedCloseKeepsOthersLastStops(t *testing.T) {
	before := goleak.IgnoreCurrent()
	root := t.TempDir()
	var s Shared
	one := subscribe(t, &s, root, Options{})
	two := subscribe(t, &s, root, Options{})
	w := one.sub.Watcher()

	one.sub.Close()
	told := len(one.summaries())
	mustWrite(t, filepath.Join(root, "later.txt"), "x")
	waitFor(t, 60*time.Second, "the burst told to the one left", func() bool { return two.saw("later.txt", false) })
	// Summaries go to the subscribers one after another on one goroutine:
	// once the second has this one, the first would have had it too.
	if n := len(one.summaries()); n != told {
		t.Fatalf("a closed subscriber was told %d more summaries", n-told)
	}
	if s.Watcher() != w {
		t.Fatal("the Watcher changed while a subscriber was left")
	}

	two.sub.Close()
	if s.Watcher() != nil {
		t.Fatal("the Watcher still runs after the last Close")
	}
	goleak.VerifyNone(t, before)

	three := subscribe(t, &s, root, Options{})
	if three.sub.Watcher() == w {
		t.Fatal("a subscriber after the last Close joined the stopped Watcher")
	}
	mustWrite(t, filepath.Join(root, "again.txt"), "x")
	waitFor(t, 60*time.Second, "the new Watcher's burst", func() bool { return three.saw("again.txt", false) })
	if len(one.summaries()) != told {
		t.Fatal("a closed subscriber was told by the new Watcher")
	}
}

// TestSharedHoldKeepsTheWatcher: a hold (a reload between an agent's stop
// and its reopening) keeps the Watcher for the next subscriber; other
// options get a Watcher of their own.
func TestSharedHoldKeepsTheWatcher(t *testing.T) {
	root := t.TempDir()
	var s Shared
	if s.Hold() != nil {
		t.Fatal("a hold with no Watcher running")
	}
	one := subscribe(t, &s, root, Options{})
	w := one.sub.Watcher()
	hold := s.Hold()
	one.sub.Close()
	if s.Watcher() != w {
		t.Fatal("the held Watcher stopped")
	}
	two := subscribe(t, &s, root, Options{})
	if two.sub.Watcher() != w {
		t.Fatal("the subscriber after the hold got a new Watcher")
	}
	hold.Close()
	mustWrite(t, filepath.Join(root, "f.txt"), "x")
	waitFor(t, 60*time.Second, "the burst", func() bool { return two.saw("f.txt", false) })

	other := subscribe(t, &s, root, Options{IgnoreDirs: []string{"vendor"}})
	if other.sub.Watcher() == w {
		t.Fatal("other options joined the running Watcher")
	}
	if s.Watcher() != other.sub.Watcher() {
		t.Fatal("new subscribers do not join the Watcher with the newest options")
	}
	// The old Watcher still serves its subscriber.
	mustWrite(t, filepath.Join(root, "g.txt"), "x")
	waitFor(t, 60*time.Second, "both Watchers' bursts", func() bool { return two.saw("g.txt", false) && other.saw("g.txt", false) })
}

// TestSharedWatcherStoppedTellsEveryone: a Watcher that stops on its own
// tells each subscriber why; the next subscriber starts a new one.
func TestSharedWatcherStoppedTellsEveryone(t *testing.T) {
	root := t.TempDir()
	var s Shared
	one := subscribe(t, &s, root, Options{})
	two := subscribe(t, &s, root, Options{})
	w := one.sub.Watcher()
	w.fw.Close() // fsnotify gone under the Watcher
	stopped := func(r *sharedSub) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.stopped) == 1 && r.stopped[0] != nil
	}
	waitFor(t, 60*time.Second, "both told of the stop", func() bool { return stopped(one) && stopped(two) })
	if s.Watcher() != nil {
		t.Fatal("a stopped Watcher is still offered")
	}
	three := subscribe(t, &s, root, Options{})
	if three.sub.Watcher() == w {
		t.Fatal("joined the stopped Watcher")
	}
}

// TestSharedLastCloseFlushes: the activity pending when the last
// subscriber closes is handed to it, as Run flushes it when it stops.
func TestSharedLastCloseFlushes(t *testing.T) {
	root := t.TempDir()
	var s Shared
	one := subscribe(t, &s, root, Options{Quiet: time.Hour, MaxWait: time.Hour})
	mustWrite(t, filepath.Join(root, "pending.txt"), "x")
	waitFor(t, 60*time.Second, "the change recorded", func() bool { return one.sub.Watcher().Stats().Changes > 0 })
	one.sub.Close()
	if !one.saw("pending.txt", false) {
		t.Fatalf("the pending burst was not handed to the last subscriber: %+v", one.summaries())
	}
}
