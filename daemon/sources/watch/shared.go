package watch

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"sync"

	"github.com/continuityd/continuityd/internal/safefile"
)

// Shared runs one Watcher for every subscriber on a work directory: the
// agents of a daemon that share a workdir each subscribe, and the tree is
// watched once (one inotify instance, one watch per directory) however
// many they are. Every subscriber is handed every Summary (overflows,
// rescans and the watch limit included: Summary.Rescanned and
// Summary.Complete say so to each) and every OnGitEvent call.
//
// The Watcher starts with the first subscriber and stops when the last
// one closes; a subscriber that comes later joins the running Watcher.
// A subscriber asking for other Options (another [watch] section after a
// reload) gets a Watcher of its own, and the old one serves its
// subscribers until they go. The zero Shared is ready to use.
type Shared struct {
	// Logger is what the shared Watcher logs with (the subscribers' own
	// Options.Logger is not used: the Watcher is nobody's in particular).
	Logger *slog.Logger

	mu  sync.Mutex
	cur *sharedRun // the run new subscribers join; nil when none runs
}

// Subscriber is told what the shared Watcher sees. Each func runs on one
// of the Watcher's goroutines, never after the subscription's Close has
// returned; it must not call Close itself. Any of them may be nil.
type Subscriber struct {
	// Summary is called with each burst, on Run's goroutine, the
	// subscribers one after another: it must return quickly and must not
	// change the Summary (the others read the same one).
	Summary func(Summary)
	// Settled is called like Options.OnSettled.
	Settled func([]Settled)
	// GitEvent is called like Options.OnGitEvent.
	GitEvent func(dir string)
	// Stopped is called when the Watcher stopped on its own (err says
	// why) while subscribed: nothing more will be reported.
	Stopped func(err error)
}

// Subscription is one subscriber's hold on a shared Watcher.
type Subscription struct {
	run *sharedRun
	sub Subscriber
	// mu is read-held while one of sub's funcs runs, so Close (which
	// write-holds it) waits for the call in flight.
	mu     sync.RWMutex
	closed bool
}

// sharedRun is one Watcher and its subscribers.
type sharedRun struct {
	s      *Shared
	o      Options
	w      *Watcher
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	subs   []*Subscription
}

// Subscribe starts watching o.Root for sub, joining the running Watcher
// when its options are the same (o.Logger and o.OnGitEvent are not
// compared: the Shared's own are used). The error is New's.
func (s *Shared) Subscribe(o Options, sub Subscriber) (*Subscription, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.cur
	if r == nil || !sameOptions(r.o, o) {
		var err error
		if r, err = s.start(o); err != nil {
			return nil, err
		}
		s.cur = r
	}
	x := &Subscription{run: r, sub: sub}
	r.subs = append(r.subs, x)
	return x, nil
}

// Hold keeps the running Watcher, if any, running until the returned
// subscription is closed (nil when none runs; closing nil does nothing):
// a reload that stops an agent and opens it again holds it, so the tree
// is not walked again for it.
func (s *Shared) Hold() *Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	x := &Subscription{run: s.cur}
	s.cur.subs = append(s.cur.subs, x)
	return x
}

// Watcher is the running Watcher new subscribers join, or nil.
func (s *Shared) Watcher() *Watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	return s.cur.w
}

// start creates a Watcher for o and runs it on a goroutine the run owns:
// the last Close cancels and waits for it. Called with s.mu held.
func (s *Shared) start(o Options) (*sharedRun, error) {
	r := &sharedRun{s: s, o: o, done: make(chan struct{})}
	o.Logger = s.Logger
	o.OnGitEvent = r.gitEvent
	o.OnSettled = r.settled
	w, err := New(o)
	if err != nil {
		return nil, err
	}
	r.w = w
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		err := w.Run(ctx, r.summary)
		if ctx.Err() != nil {
			return // the last subscriber left
		}
		s.mu.Lock()
		if s.cur == r {
			s.cur = nil // the next subscriber starts a new one
		}
		subs := slices.Clone(r.subs)
		s.mu.Unlock()
		for _, x := range subs {
			x.call(func(sub Subscriber) {
				if sub.Stopped != nil {
					sub.Stopped(err)
				}
			})
		}
	}()
	return r, nil
}

// sameOptions reports whether a Watcher run with a serves b as well: the
// same tree, read with the same rights (Opener).
func sameOptions(a, b Options) bool {
	return a.Root == b.Root && slices.Equal(a.Ignore, b.Ignore) && slices.Equal(a.IgnoreDirs, b.IgnoreDirs) &&
		a.Quiet == b.Quiet && a.Settle == b.Settle && a.MaxWait == b.MaxWait && a.MaxPaths == b.MaxPaths && sameOpener(a.Opener, b.Opener)
}

// sameOpener compares two Openers without panicking on one whose type is
// not comparable (taken for another).
func sameOpener(a, b safefile.Opener) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

// subscribers are the run's subscribers now.
func (r *sharedRun) subscribers() []*Subscription {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return slices.Clone(r.subs)
}

func (r *sharedRun) summary(sum Summary) {
	for _, x := range r.subscribers() {
		x.call(func(sub Subscriber) {
			if sub.Summary != nil {
				sub.Summary(sum)
			}
		})
	}
}

func (r *sharedRun) settled(paths []Settled) {
	for _, x := range r.subscribers() {
		x.call(func(sub Subscriber) {
			if sub.Settled != nil {
				sub.Settled(paths)
			}
		})
	}
}

func (r *sharedRun) gitEvent(dir string) {
	for _, x := range r.subscribers() {
		x.call(func(sub Subscriber) {
			if sub.GitEvent != nil {
				sub.GitEvent(dir)
			}
		})
	}
}

// call runs f with the subscriber unless it has closed.
func (x *Subscription) call(f func(Subscriber)) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if !x.closed {
		f(x.sub)
	}
}

// Watcher is the Watcher the subscription is on (its Ready, Degraded and
// Stats are everyone's).
func (x *Subscription) Watcher() *Watcher { return x.run.w }

// Close ends the subscription: none of its funcs runs after Close
// returns. The last subscriber's Close stops the Watcher, is handed the
// activity still pending (as Run flushes it when it stops) and waits for
// the Watcher's goroutines; any other subscriber leaves the pending burst
// to those who stay. Closing twice, or nil, does nothing.
func (x *Subscription) Close() {
	if x == nil {
		return
	}
	r := x.run
	r.s.mu.Lock()
	i := slices.Index(r.subs, x)
	if i < 0 { // closed already
		r.s.mu.Unlock()
		return
	}
	last := len(r.subs) == 1
	if last {
		if r.s.cur == r {
			r.s.cur = nil
		}
	} else {
		r.subs = slices.Delete(r.subs, i, i+1)
	}
	r.s.mu.Unlock()
	if last {
		r.cancel()
		<-r.done
		r.s.mu.Lock()
		r.subs = nil
		r.s.mu.Unlock()
	}
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
}
