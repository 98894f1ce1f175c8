package graph

import (
	"context"
	stderrors "errors"
	"runtime"
	"runtime/debug"
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
	res := &Result[ID]{Nodes: make([]NodeResult[ID], n), index: g.index}
	res.Start = time.Now()
	if n == 0 {
		res.End = res.Start
		return res, nil
	}
	s := newRun(ctx, g, opts, res)
	s.begin()
	s.wg.Wait()
	res.End = time.Now()
	if int(s.succeeded) == n {
		return res, nil
	}
	return res, runError(ctx, res.Nodes)
}

// run is the state of one Run.
//
// Workers run nodes. A worker that finishes a node counts down the pending
// blockers of the node's dependents, queues those that became runnable, then
// takes the oldest queued node and runs it itself: a chain runs on one
// goroutine, without handoffs. As the node it takes may block, it does not
// leave other queued nodes waiting on it: it hands them to parked or new
// workers, one per node that is inside its function (and may be blocked too),
// at least one unless another worker is coming to take more (spread). A
// worker whose node was quick parks instead when enough others are around
// (crowded). A worker with nothing to take parks until it is handed a node or
// the run is over. So workers multiply while nodes block, up to one per
// running node, and stay about one per processor while nodes are quick.
//
// The shared state is what mu guards, plus a node's Start and End, which only
// the worker running the node writes, before it finishes the node. Finishing
// a node and taking the next one are one critical section. busy, an atomic
// counter, tells the workers who is around (see its fields); a worker updates
// it when its node returns ("coming") and, last thing in a critical section,
// when it is done with the shared state. Per node, the hot path then costs one
// clock read (a worker's next node starts when its previous one ended), those
// two atomic additions and one lock of mu, unless the worker is alone: busy
// shows no node inside its function but the worker's own (any other could
// return any time) and no other worker coming. Then no other goroutine
// touches the shared state or looks at busy until this worker hands a node
// out, so it skips mu and leaves busy as it is, as on a chain: the hot path is
// the clock read and an atomic load. That is safe because seeing busy show a
// worker alone synchronizes with the last change each other worker made to
// busy, which came after its last write to the shared state (the operations
// of sync/atomic are sequentially consistent).
type run[ID comparable] struct {
	// Set up before the first worker starts, then read-only (the contents
	// of nodes, pending and queue are not).
	ctx   context.Context
	done  <-chan struct{}
	g     *Graph[ID]
	deps  *adjacency
	start time.Time
	limit int32
	procs int32 // GOMAXPROCS
	nodes []NodeResult[ID]
	// pending[i] is the number of unfinished blockers of node i, plus
	// notOK once one of them did not succeed. Guarded by mu.
	pending []int32
	// queue[head:tail] holds the runnable nodes waiting for a worker, FIFO;
	// each node is queued at most once. Guarded by mu.
	queue []int32
	stack []int32 // scratch for finish; guarded by mu
	wg    sync.WaitGroup
	// wake hands nodes to parked workers; closed when every node is
	// finished. A node is sent only for a worker counted in idle, which is
	// waiting on wake or about to, so a send waits at most for that worker
	// to get there; the buffer makes that rare without costing O(nodes).
	wake chan int32

	// What workers write for every node sits on a cache line of its own
	// (64 bytes on common processors), so that a worker's atomic additions to
	// busy and its critical section move one line between processors, not
	// several, and do not invalidate the read-only fields.
	_ [64]byte
	// busy counts, in its low 32 bits, the nodes workers took for
	// themselves and whose function has not returned (or is about to be
	// called), and, in its high 32 bits, the workers coming to take mu: their
	// node returned and they have not finished it yet, or they were handed a
	// node and have not taken it over yet.
	busy atomic.Int64
	mu   sync.Mutex
	// Guarded by mu (see run for the worker alone):
	head, tail int32
	active     int32 // nodes taken by a worker and not finished
	handoffs   int32 // nodes handed to a worker that has not taken mu since
	idle       int32 // parked workers not yet handed a node
	left       int32 // nodes not finished
	succeeded  int32 // nodes finished as Succeeded
	_          [64 - 8 - 8 - 7*4]byte
}

const (
	// notOK marks a pending count: a blocker did not succeed.
	notOK = 1 << 30
	// coming is the unit of the high half of busy.
	coming = 1 << 32
	// quickNode is the duration under which a node costs less than the
	// scheduler's bookkeeping around it and a handoff between workers.
	quickNode = 50 * time.Microsecond
	// wakeBuffer is the capacity of wake.
	wakeBuffer = 256
)

func newRun[ID comparable](ctx context.Context, g *Graph[ID], opts RunOptions, res *Result[ID]) *run[ID] {
	n := len(g.ids)
	limit := n
	if opts.MaxParallel > 0 && opts.MaxParallel < n {
		limit = opts.MaxParallel
	}
	scratch := make([]int32, 2*n)
	s := &run[ID]{
		ctx:     ctx,
		done:    ctx.Done(),
		g:       g,
		deps:    g.dependents(),
		start:   res.Start,
		limit:   int32(limit),
		procs:   int32(runtime.GOMAXPROCS(0)),
		nodes:   res.Nodes,
		wake:    make(chan int32, min(limit, wakeBuffer)),
		pending: scratch[:n:n],
		queue:   scratch[n:],
		left:    int32(n),
	}
	for i := range int32(n) {
		s.pending[i] = g.blockerStart[i+1] - g.blockerStart[i]
		if s.pending[i] == 0 {
			s.queue[s.tail] = i
			s.tail++
		}
	}
	return s
}

// begin hands the first runnable node to a new worker, which spreads the
// rest.
func (s *run[ID]) begin() {
	s.mu.Lock()
	var first []int32
	if s.claim() >= 0 {
		first, _ = s.handOut(s.head-1, 1)
	}
	last := s.left == 0 // ctx was done already: every node got canceled
	s.mu.Unlock()
	s.dispatch(first, 0)
	if last {
		close(s.wake)
	}
}

// worker takes over node i, which it was handed, and runs it, then the nodes
// it takes or is handed, until the run is over.
func (s *run[ID]) worker(i int32) {
	defer s.wg.Done()
	for {
		s.busy.Add(1 - coming)
		s.mu.Lock()
		s.handoffs--
		extra, wakes := s.spread(s.busy.Load())
		s.mu.Unlock()
		s.dispatch(extra, wakes)
		last := time.Duration(-1) // end of the node run before, -1 for none
		seen := int64(0)          // busy as the worker left it, 1 if it was alone
		for i >= 0 {
			var outcome Outcome
			var err error
			outcome, seen, err = s.exec(i, last, seen)
			last = s.nodes[i].End
			i, seen = s.complete(i, outcome, err, seen, false)
		}
		var ok bool
		if i, ok = <-s.wake; !ok {
			return
		}
	}
}

// exec calls the function of node i unless the run is canceled, then leaves
// it; seen is passed to leave, which exec returns the result of. If the
// worker ran another node just before, last is its end: it is also the start
// of node i (unless i became runnable later), which saves a clock read at the
// cost of counting the bookkeeping in between, well under a microsecond, as
// part of node i.
func (s *run[ID]) exec(i int32, last time.Duration, seen int64) (Outcome, int64, error) {
	if s.canceled() {
		return Canceled, s.leave(seen), nil
	}
	r := &s.nodes[i]
	switch {
	case last < 0:
		r.Start = s.now()
	case last < r.Wait:
		r.Start = r.Wait
	default:
		r.Start = last
	}
	err := s.call(i)
	r.End = s.now()
	busy := s.leave(seen)
	if err != nil {
		return Failed, busy, err
	}
	return Succeeded, busy, nil
}

// leave is called by a worker whose node returned (or was canceled). Unless
// busy shows the worker alone, it counts the worker as coming instead of
// inside. It returns busy as the worker left it: 1 if the worker is alone (and
// still counts inside). seen is the value complete returned last time: a
// worker that was not alone then does not look whether it is now, as reading
// busy before adding to it would cost a second transfer of its cache line
// when other workers write it.
func (s *run[ID]) leave(seen int64) int64 {
	if seen == 1 && s.busy.Load() == 1 {
		return 1
	}
	return s.busy.Add(coming - 1)
}

// call calls the function of node i, turning a panic into a *PanicError. If
// the function calls runtime.Goexit, call finishes the node itself and hands
// the worker's next node on, as this worker is exiting.
func (s *run[ID]) call(i int32) (err error) {
	normal := false
	defer func() {
		if normal {
			return
		}
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			return
		}
		s.nodes[i].End = s.now()
		s.complete(i, Failed, ErrGoexit, s.leave(0), true)
	}()
	err = s.g.funcs[i](s.ctx)
	normal = true
	return err
}

// complete finishes node i with its outcome, then takes the next node for the
// calling worker, counting it inside its function, and hands out more if
// useful. busy is what leave returned. It returns the worker's next node, or
// -1; then the worker is counted as parked and must wait on wake. It also
// returns busy as the worker left it, 1 if it is still alone, for leave. If
// exiting is set, the worker is leaving (runtime.Goexit): the node it takes
// is handed out too, and it is not counted as parked.
func (s *run[ID]) complete(i int32, outcome Outcome, err error, busy int64, exiting bool) (int32, int64) {
	mine := int64(coming) // what the caller counts for in busy
	if busy == 1 {
		mine = 1
	}
	alone := busy == mine
	if !alone {
		s.mu.Lock()
		busy = s.busy.Load()
	}
	busy -= mine // without the caller
	s.active--
	s.finish(i, outcome, err)
	next := int32(-1)
	if exiting || !s.crowded(busy, s.nodes[i].Duration()) {
		next = s.claim()
	}
	var extra []int32
	var wakes int
	now := int64(0) // what the caller will count for
	switch {
	case next < 0:
		if !exiting && s.left > 0 {
			s.idle++
		}
	case exiting:
		extra, wakes = s.handOut(s.head-1, 1)
	default:
		now = 1 // its next node, inside its function from now on
		extra, wakes = s.spread(busy + now)
	}
	last := s.left == 0
	seen := int64(0)
	if now != mine {
		seen = s.busy.Add(now - mine) // after the last write to the shared state: see run
	} else if alone && extra == nil {
		seen = 1 // busy unchanged
	}
	if !alone {
		s.mu.Unlock()
	}
	s.dispatch(extra, wakes)
	if last {
		close(s.wake)
	}
	if exiting {
		return -1, 0
	}
	return next, seen
}

// finish records the outcome of node i (and its ID: a record is filled in
// when the node is finished, so that Run does not go over all records
// first) and releases its dependents: one whose blockers are all finished is
// queued if they all succeeded, else it is finished as Blocked or Canceled,
// which cascades. Caller holds mu (or is alone).
func (s *run[ID]) finish(i int32, outcome Outcome, err error) {
	s.nodes[i].Outcome = outcome
	if err != nil {
		s.nodes[i].Err = err
	}
	if outcome == Succeeded {
		s.succeeded++
	}
	stack := s.stack[:0]
	for {
		s.nodes[i].ID = s.g.ids[i]
		s.left--
		ok := s.nodes[i].Outcome == Succeeded
		for _, d := range s.deps.of(i) {
			p := s.pending[d] - 1
			if !ok {
				p |= notOK
			}
			s.pending[d] = p
			switch p {
			case 0:
				s.nodes[d].Wait = s.nodes[i].End
				s.queue[s.tail] = d
				s.tail++
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
	if cap(stack) > cap(s.stack) {
		s.stack = stack
	}
}

// skip records why node d, whose blockers are finished, cannot run: Blocked
// by the failed ancestor behind its first failed or blocked blocker, else
// Canceled. Caller holds mu (or is alone).
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

// claim takes the oldest queued node if a slot is free, or returns -1. Once
// the run is canceled it finishes the queued nodes as Canceled instead.
// Caller holds mu (or is alone).
func (s *run[ID]) claim() int32 {
	if s.head == s.tail || s.active >= s.limit {
		return -1
	}
	if s.canceled() {
		for s.head < s.tail {
			s.head++
			s.finish(s.queue[s.head-1], Canceled, nil)
		}
		return -1
	}
	s.active++
	s.head++
	return s.queue[s.head-1]
}

// crowded reports whether a worker whose node returned after took should
// park rather than take another node: nodes are quick (shorter than
// quickNode), the other workers outside node functions are enough to keep
// every processor busy, and one of them is sure to take the lock and look at
// the queue (it is coming). Without this, workers added in case nodes block
// would only contend for the lock when nodes return at once. busy is the
// value of s.busy without the caller. Caller holds mu (or is alone).
func (s *run[ID]) crowded(busy int64, took time.Duration) bool {
	inFn, others := int32(busy), int32(busy>>32)
	return took < quickNode && s.active-inFn >= s.procs && others > 0
}

// spread is called by a worker about to run a node, which may block, with
// busy counting that node. It takes queued nodes for other workers so that,
// counting the nodes already handed out, there is one for each other node
// inside its function (which may be blocked too), and at least one if no
// other worker is coming to take more: workers multiply while nodes block and
// stay few while nodes return at once. It returns the nodes taken and how
// many of them go to parked workers; the rest need new workers. Caller holds
// mu (or is alone).
func (s *run[ID]) spread(busy int64) (extra []int32, wakes int) {
	want := int32(busy) - 1 // other nodes inside their function
	if busy>>32 == 0 {
		want = max(want, 1)
	}
	h0 := s.head // claims are contiguous from h0; a cancel drains after them
	k := 0
	for s.handoffs+int32(k) < want && s.claim() >= 0 {
		k++
	}
	return s.handOut(h0, k)
}

// handOut hands the k nodes queue[h0:h0+k], just taken, to other workers,
// parked ones first, and counts them coming. It returns them and how many go
// to parked workers, for dispatch. Caller holds mu (or is alone).
func (s *run[ID]) handOut(h0 int32, k int) (nodes []int32, wakes int) {
	if k == 0 {
		return nil, 0
	}
	s.handoffs += int32(k)
	s.busy.Add(int64(k) * coming)
	w := min(int32(k), s.idle)
	s.idle -= w
	return s.queue[h0 : h0+int32(k)], int(w)
}

// dispatch hands the first wakes nodes to parked workers and starts a new
// worker for each of the others. The nodes were counted in handoffs.
func (s *run[ID]) dispatch(nodes []int32, wakes int) {
	for k, i := range nodes {
		if k < wakes {
			s.wake <- i
			continue
		}
		s.wg.Add(1)
		go s.worker(i)
	}
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
