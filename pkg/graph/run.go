package graph

import (
	"context"
	stderrors "errors"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pkg/errors"
)

// RunOptions configures Run.
type RunOptions struct {
	// MaxParallel bounds how many node functions run at the same time. Nodes
	// waiting for their blockers hold no slot. Default 0 (as any value < 1):
	// unbounded, every runnable node runs at once.
	MaxParallel int
}

// Run runs every node of the graph once, each as soon as all its blockers
// have succeeded, independent nodes concurrently, and waits for them.
//
// A node whose function fails (returns an error, panics or calls
// runtime.Goexit) does not stop the run: its descendants are not run and are
// reported Blocked, every other node still runs. Once ctx is done no node
// starts any more: the nodes not started are reported Canceled and Run
// returns when the running ones have returned. Every goroutine Run starts has
// exited when it returns.
//
// The Result is never nil and holds one record per node, in insertion order.
// The error is nil if every node succeeded; otherwise it joins (errors.Join)
// a *NodeError for each failed node, in insertion order, and, if nodes were
// canceled, the context's cause (errors.Is(err, context.Canceled) works).
func (g *Graph[ID]) Run(ctx context.Context, opts RunOptions) (*Result[ID], error) {
	n := len(g.ids)
	res := &Result[ID]{Nodes: make([]NodeResult[ID], n), g: g}
	res.Start = time.Now()
	if n == 0 {
		res.End = res.Start
		return res, nil
	}
	s := newRun(ctx, g, opts, res)
	s.wake()
	s.wg.Wait()
	res.End = time.Now()
	if int(s.succeeded.Load()) == n {
		return res, nil
	}
	return res, runError(ctx, res.Nodes)
}

// run is the state of one Run.
//
// Runnable nodes wait in queues, one per processor (GOMAXPROCS, at most
// MaxParallel), and worker goroutines run them, at most MaxParallel workers.
// Each worker has a home queue. When its node returns, a worker counts down
// the pending blockers of the node's dependents (atomically: no lock) and
// puts those that became runnable in its home queue, except the first (in
// insertion order), which it runs next: a chain runs on one goroutine,
// without handoffs. If its node made none runnable, it takes the oldest node
// of its home queue, and if that is empty it searches the other queues and
// moves the older half of the first non-empty one to its own. While quick nodes are run by as many workers as
// there are processors, each worker only touches its own queue and the
// dependents' counters: no cache line moves between processors for every
// node.
//
// As any node may block, a worker never lets runnable nodes wait on it: it
// makes sure, before it calls a node function while its queue holds nodes,
// that a worker is searching, waking a parked one or starting one (within
// MaxParallel) if none is. A searching worker that finds nodes keeps two
// searching while nodes are still queued, and one that finds none parks,
// after looking once more if it was the last. So a queued node always has a
// worker on its way, without polling. A searching worker that is started
// while every processor is busy only runs when a worker blocks (or the Go
// scheduler preempts one), which is exactly when it is needed: workers
// multiply while nodes block and stay about one per processor while they
// return quickly. A worker whose node ran for slowNode or more, and so
// probably blocked, wakes one worker for each node it queues, so that a layer
// of blocking nodes starts at once rather than one after the other.
//
// The scheme is that of the Go scheduler's run queues and spinning threads,
// with blocking node functions in the place of system calls.
type run[ID comparable] struct {
	// Set up before the first worker starts, then read-only (not the
	// contents of nodes, pending and queues).
	ctx    context.Context
	done   <-chan struct{}
	g      *Graph[ID]
	start  time.Time
	limit  int32
	nodes  []NodeResult[ID]
	queues []queue
	// pending[i] is the number of unfinished blockers of node i, plus
	// notOK once one of them did not succeed. Set before the first worker
	// starts, then only accessed with atomic operations (the functions, not
	// atomic.Int32, so that setting it up costs plain writes).
	pending []int32
	wg      sync.WaitGroup
	// finished is closed when every node is finished (left is 0).
	finished chan struct{}

	// Written only when workers start, park, wake or run out of work, on
	// cache lines apart from the read-only fields and from each other.
	_ [64]byte
	// searching counts the workers looking for a queued node: started or
	// woken and not yet running one, or having found their queue empty.
	searching atomic.Int32
	// spare tells whether wake can wake or start a worker: one is parked or
	// MaxParallel allows one more. Written under mu when that changes.
	spare atomic.Bool
	_     [59]byte
	// left counts the nodes whose finish no worker has reported yet: workers
	// report theirs in bulk when they run out of work.
	left atomic.Int32
	// succeeded counts the Succeeded nodes of workers that exited.
	succeeded atomic.Int32
	_         [56]byte
	mu        sync.Mutex // guards idle, workers and started
	idle      []*worker[ID]
	workers   int32 // live workers
	started   int32 // workers started, for their home queues
}

// queue is a FIFO of runnable nodes, the home of some workers.
type queue struct {
	mu    sync.Mutex
	nodes []int32 // nodes[head:] are queued
	head  int
	// full tells whether nodes are queued, for looking without the lock. It
	// is written only when that changes, so that most pushes and pops cost
	// no atomic write but the lock's.
	full atomic.Bool
	_    [64 - 8 - 24 - 8 - 1]byte
}

// worker is the state of one worker goroutine, only ever touched by it.
type worker[ID comparable] struct {
	r    *run[ID]
	home *queue
	// next is the node to run next, made runnable by the previous one, or -1.
	next int32
	// last is the end of the node run just before, or -1: the start of the
	// next node if it became runnable before (saving a clock read).
	last time.Duration
	// finished and succeeded count the nodes finished (and Succeeded) since
	// the last report.
	finished, succeeded int32
	searching           bool // counted in run.searching
	slow                bool // the last node ran for slowNode or more
	wake                chan struct{}
	stack, found        []int32 // scratch
	// Keeps the next worker's fields, written for every node, off this
	// worker's cache lines.
	_ [64]byte
}

const (
	// notOK marks a pending count: a blocker did not succeed.
	notOK = 1 << 30
	// slowNode is the duration from which a node probably blocked (a
	// system call, a network round trip, a timer) rather than computed:
	// ten times a context switch between goroutines, a thousand times the
	// scheduler's work per node.
	slowNode = 50 * time.Microsecond
	// searchers is how many workers a worker that found a node keeps
	// searching while nodes are queued.
	searchers = 2
)

func newRun[ID comparable](ctx context.Context, g *Graph[ID], opts RunOptions, res *Result[ID]) *run[ID] {
	n := len(g.ids)
	limit := n
	if opts.MaxParallel > 0 && opts.MaxParallel < n {
		limit = opts.MaxParallel
	}
	s := &run[ID]{
		ctx:      ctx,
		done:     ctx.Done(),
		g:        g,
		start:    res.Start,
		limit:    int32(limit),
		nodes:    res.Nodes,
		queues:   make([]queue, min(runtime.GOMAXPROCS(0), limit)),
		pending:  make([]int32, n),
		finished: make(chan struct{}),
	}
	s.left.Store(int32(n))
	s.spare.Store(true)
	nroots := 0
	for i := range int32(n) {
		p := g.blockerStart[i+1] - g.blockerStart[i]
		if p == 0 {
			nroots++
		}
		s.pending[i] = p
	}
	roots := make([]int32, 0, nroots)
	for i := range int32(n) {
		if g.blockerStart[i+1] == g.blockerStart[i] {
			roots = append(roots, i)
		}
	}
	// Give each queue a contiguous share of the roots, in insertion order.
	k := len(s.queues)
	for q := range s.queues {
		share := roots[q*len(roots)/k : (q+1)*len(roots)/k]
		s.queues[q].nodes = share[:len(share):len(share)]
		s.queues[q].full.Store(len(share) > 0)
	}
	return s
}

// wake makes a worker search: it wakes a parked one or starts one if
// MaxParallel allows. Else every worker is running a node or on its way to
// look at the queues itself.
func (s *run[ID]) wake() {
	s.mu.Lock()
	if k := len(s.idle); k > 0 {
		w := s.idle[k-1]
		s.idle = s.idle[:k-1]
		s.searching.Add(1)
		s.updateSpare()
		s.mu.Unlock()
		w.wake <- struct{}{}
		return
	}
	if s.workers >= s.limit {
		s.mu.Unlock()
		return
	}
	s.workers++
	home := &s.queues[int(s.started)%len(s.queues)]
	s.started++
	s.searching.Add(1)
	s.updateSpare()
	s.mu.Unlock()
	w := &worker[ID]{r: s, home: home, next: -1, last: -1, searching: true, wake: make(chan struct{}, 1)}
	s.wg.Add(1)
	go w.loop()
}

// updateSpare sets spare after idle or workers changed. Caller holds mu.
func (s *run[ID]) updateSpare() {
	if spare := len(s.idle) > 0 || s.workers < s.limit; spare != s.spare.Load() {
		s.spare.Store(spare)
	}
}

// needSearcher reports whether a worker should be woken because nodes are
// queued in q: none is searching, and one can be woken or started. Else a
// worker is on its way to the queues, or all MaxParallel workers are there
// or running nodes.
func (s *run[ID]) needSearcher(q *queue) bool {
	return q.full.Load() && s.searching.Load() == 0 && s.spare.Load()
}

// queued reports whether any queue holds a node.
func (s *run[ID]) queued() bool {
	for q := range s.queues {
		if s.queues[q].full.Load() {
			return true
		}
	}
	return false
}

// loop runs nodes until every node is finished.
func (w *worker[ID]) loop() {
	defer w.r.wg.Done()
	defer w.exit()
	for {
		i := w.next
		switch {
		case i >= 0:
			w.next = -1
		case !w.searching:
			if i = w.home.pop(); i >= 0 {
				break
			}
			fallthrough
		default:
			if i = w.find(); i < 0 {
				return
			}
		}
		w.run(i)
	}
}

// run runs node i, unless the run is canceled, and finishes it.
func (w *worker[ID]) run(i int32) {
	s := w.r
	if s.canceled() {
		w.finish(i, Canceled, nil)
		return
	}
	if s.needSearcher(w.home) {
		s.wake() // node i may block: see run
	}
	r := &s.nodes[i]
	switch {
	case w.last < 0:
		r.Start = s.now()
	case w.last < r.Wait:
		r.Start = r.Wait
	default:
		r.Start = w.last
	}
	err := w.call(i)
	r.End = s.now()
	w.last = r.End
	w.slow = r.End-r.Start >= slowNode
	if err != nil {
		w.finish(i, Failed, err)
		return
	}
	w.finish(i, Succeeded, nil)
}

// call calls the function of node i, turning a panic into a *PanicError. If
// the function calls runtime.Goexit, call finishes the node as Failed before
// the worker exits.
func (w *worker[ID]) call(i int32) (err error) {
	normal := false
	defer func() {
		if normal {
			return
		}
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			return
		}
		w.r.nodes[i].End = w.r.now()
		w.finish(i, Failed, ErrGoexit)
	}()
	err = w.r.g.funcs[i](w.r.ctx)
	normal = true
	return err
}

// find searches the queues for a node, the worker's home first, moving half
// of another queue's nodes to its home, and returns one. If there is none, it
// parks the worker until it is woken to search again. It returns -1 once
// every node is finished.
func (w *worker[ID]) find() int32 {
	s := w.r
	if !w.searching {
		w.searching = true
		s.searching.Add(1)
		w.report()
	}
	for {
		if i := w.take(); i >= 0 {
			w.searching = false
			// A searching worker runs when a processor is free: while nodes
			// are queued, that is when nodes block. Keep two searching, so
			// that workers double until every queued node runs.
			for k := s.searching.Add(-1); k < searchers && s.queued() && s.spare.Load(); k++ {
				s.wake()
			}
			return i
		}
		s.mu.Lock()
		s.idle = append(s.idle, w)
		s.updateSpare()
		s.mu.Unlock()
		// A worker that queues a node after this one looked, and sees no
		// worker searching, wakes one; if it looked before the decrement
		// below, the look after it sees the node.
		if s.searching.Add(-1) == 0 && s.queued() && w.unpark() {
			continue
		}
		w.last = -1
		select {
		case <-w.wake: // counted as searching by the waker
		case <-s.finished:
			w.searching = false
			return -1
		}
	}
}

// unpark takes the worker, just parked, off the idle list and counts it
// searching again; false if a waker took it first.
func (w *worker[ID]) unpark() bool {
	s := w.r
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := len(s.idle) - 1; k >= 0; k-- {
		if s.idle[k] == w {
			s.idle = append(s.idle[:k], s.idle[k+1:]...)
			s.searching.Add(1)
			s.updateSpare()
			return true
		}
	}
	return false
}

// take takes the oldest node of the home queue or, if it is empty, of the
// first other queue that holds nodes, moving half of them home. It returns -1
// if every queue is empty.
func (w *worker[ID]) take() int32 {
	if i := w.home.pop(); i >= 0 {
		return i
	}
	s := w.r
	h := 0
	for ; &s.queues[h] != w.home; h++ {
	}
	for k := 1; k < len(s.queues); k++ {
		q := &s.queues[(h+k)%len(s.queues)]
		if !q.full.Load() {
			continue
		}
		w.found = q.popHalf(w.found[:0])
		if len(w.found) == 0 {
			continue
		}
		w.home.push(w.found[1:])
		return w.found[0]
	}
	return -1
}

// finish records the outcome of node i (and its ID: a record is filled in
// when the node is finished, so that Run does not go over all records
// first) and releases its dependents: one whose blockers are all finished is
// runnable if they all succeeded, else it is finished as Blocked or
// Canceled, which cascades. The worker runs the first runnable one next if
// its queue is empty, and queues the others.
func (w *worker[ID]) finish(i int32, outcome Outcome, err error) {
	s := w.r
	s.nodes[i].Outcome = outcome
	if err != nil {
		s.nodes[i].Err = err
	}
	if outcome == Succeeded {
		w.succeeded++
	}
	stack, found := w.stack[:0], w.found[:0]
	for {
		r := &s.nodes[i]
		r.ID = s.g.ids[i]
		w.finished++
		ok := r.Outcome == Succeeded
		for e := s.g.firstDep[i]; e >= 0; e = s.g.dep[e].next {
			switch d := s.g.dep[e].node; s.release(d, ok) {
			case 0:
				s.nodes[d].Wait = r.End
				found = append(found, d)
			case notOK:
				s.skip(d)
				stack = append(stack, d)
			}
		}
		if len(stack) == 0 {
			break
		}
		i, stack = stack[len(stack)-1], stack[:len(stack)-1]
	}
	if cap(stack) > cap(w.stack) || cap(found) > cap(w.found) {
		w.stack, w.found = stack[:0], found[:0] // kept if they grew
	}
	slices.Reverse(found) // in insertion order: the dependents come latest first
	if len(found) > 0 && w.next < 0 {
		w.next, found = found[0], found[1:]
	}
	w.home.push(found)
	if w.slow {
		// Nodes take long, so they probably block: start the queued ones
		// now, one worker each, rather than one after the other.
		for range found {
			if !s.spare.Load() {
				break
			}
			s.wake()
		}
	}
}

// release counts down the unfinished blockers of node d for one that
// finished, ok if it succeeded. It returns what is left: 0 if d is now
// runnable, notOK if its blockers are all finished and not all succeeded,
// more if some are not finished. The last blocker only reads the count, as no
// one else writes it any more: on a chain, no atomic read-modify-write.
func (s *run[ID]) release(d int32, ok bool) int32 {
	p := &s.pending[d]
	if v := atomic.LoadInt32(p); v&^notOK == 1 {
		if !ok {
			return notOK
		}
		return v - 1
	}
	if !ok {
		atomic.OrInt32(p, notOK) // before the count down, so that the last one sees it
	}
	return atomic.AddInt32(p, -1)
}

// skip records why node d, whose blockers are all finished and not all
// succeeded, cannot run: Blocked by the failed ancestor behind its first
// failed or blocked blocker, else Canceled. The blockers' outcomes were
// written before their count down of pending[d], the last of which the
// caller made.
func (s *run[ID]) skip(d int32) {
	r := &s.nodes[d]
	r.Outcome = Canceled
	for _, b := range s.g.blockersOf(d) {
		switch br := &s.nodes[b]; br.Outcome {
		case Failed:
			r.Outcome, r.BlockedBy = Blocked, s.g.ids[b]
			return
		case Blocked:
			r.Outcome, r.BlockedBy = Blocked, br.BlockedBy
			return
		}
	}
}

// report adds the nodes the worker finished to the run's counts, and closes
// finished if they were the last.
func (w *worker[ID]) report() {
	if w.finished == 0 {
		return
	}
	if w.r.left.Add(-w.finished) == 0 {
		close(w.r.finished)
	}
	w.finished = 0
}

// exit is the worker's last act, when every node is finished or when a node
// function called runtime.Goexit on it: it queues its next node, reports its
// counts and, if nodes are queued, makes sure another worker searches.
func (w *worker[ID]) exit() {
	s := w.r
	if w.next >= 0 {
		w.home.push([]int32{w.next})
		w.next = -1
	}
	if w.searching {
		s.searching.Add(-1)
	}
	s.succeeded.Add(w.succeeded)
	s.mu.Lock()
	s.workers--
	s.updateSpare()
	s.mu.Unlock()
	w.report()
	if s.queued() && s.searching.Load() == 0 {
		s.wake()
	}
}

// push queues nodes, in order.
func (q *queue) push(nodes []int32) {
	if len(nodes) == 0 {
		return
	}
	q.mu.Lock()
	q.nodes = append(q.nodes, nodes...)
	q.update()
	q.mu.Unlock()
}

// update sets full after a push or pop. Caller holds mu.
func (q *queue) update() {
	if full := q.head < len(q.nodes); full != q.full.Load() {
		q.full.Store(full)
	}
}

// pop takes the oldest node, or returns -1.
func (q *queue) pop() int32 {
	if !q.full.Load() {
		return -1
	}
	q.mu.Lock()
	if q.head == len(q.nodes) {
		q.mu.Unlock()
		return -1
	}
	i := q.nodes[q.head]
	q.head++
	if q.head == len(q.nodes) {
		q.nodes, q.head = q.nodes[:0], 0
	}
	q.update()
	q.mu.Unlock()
	return i
}

// popHalf takes the older half of the nodes (at least one), appending them
// to dst.
func (q *queue) popHalf(dst []int32) []int32 {
	q.mu.Lock()
	n := len(q.nodes) - q.head
	k := n - n/2
	dst = append(dst, q.nodes[q.head:q.head+k]...)
	q.head += k
	if q.head == len(q.nodes) {
		q.nodes, q.head = q.nodes[:0], 0
	}
	q.update()
	q.mu.Unlock()
	return dst
}

// now returns the time since the run's start. It reads only the monotonic
// clock, which costs half of time.Now.
func (s *run[ID]) now() time.Duration { return time.Since(s.start) }

func (s *run[ID]) canceled() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// runError joins the errors of the failed nodes and, if nodes were canceled,
// the cause of ctx.
func runError[ID comparable](ctx context.Context, nodes []NodeResult[ID]) error {
	var errs []error
	canceled := 0
	for i := range nodes {
		switch r := &nodes[i]; r.Outcome {
		case Failed:
			errs = append(errs, &NodeError[ID]{ID: r.ID, Err: r.Err})
		case Canceled:
			canceled++
		}
	}
	if canceled > 0 {
		errs = append(errs, errors.Wrapf(context.Cause(ctx), "graph: %d nodes canceled", canceled))
	}
	return stderrors.Join(errs...)
}
