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
	for i := range res.Nodes {
		res.Nodes[i].ID = g.ids[i]
	}
	res.Start = time.Now()
	if n > 0 {
		s := newRun(ctx, g, opts, res)
		s.begin()
		s.wg.Wait()
	}
	res.End = time.Now()
	return res, runError(ctx, res.Nodes)
}

// run is the state of one Run.
//
// Workers run nodes. A worker that finishes a node, under mu, counts down the
// pending blockers of the node's dependents, queues those that became
// runnable, then takes the oldest queued node and runs it itself: a chain
// runs on one goroutine, without handoffs. As the node it takes may block, it
// does not leave other queued nodes waiting on it: it hands them to parked or
// new workers, one per node that is inside its function (and may be blocked
// too), at least one unless another worker is on its way back (spread). A
// worker whose node was quick parks instead when enough others are around
// (crowded). A worker with nothing to take parks until it is handed a node or
// the run is over. So workers multiply while nodes block, up to one per
// running node, and stay about one per processor while nodes are quick.
type run[ID comparable] struct {
	ctx   context.Context
	done  <-chan struct{}
	g     *Graph[ID]
	deps  *adjacency
	start time.Time
	limit int32
	procs int32 // GOMAXPROCS
	nodes []NodeResult[ID]

	wg sync.WaitGroup
	// wake hands nodes to parked workers; closed when every node is
	// finished. Its capacity bounds the number of workers, so sends never
	// block.
	wake chan int32
	// handoffs counts nodes handed to a worker that has not started yet.
	handoffs atomic.Int32
	// busy counts, in its low 32 bits, nodes inside their function and, in
	// its high 32 bits, workers whose node returned and which have not
	// finished it under mu yet.
	busy atomic.Int64

	mu sync.Mutex
	// pending[i] is the number of unfinished blockers of node i, plus
	// notOK once one of them did not succeed.
	pending []int32
	queue   []int32 // runnable nodes, FIFO; each node is queued at most once
	head    int     // queue[head:] waits for a worker
	active  int32   // nodes taken by a worker and not finished
	idle    int32   // parked workers not yet handed a node
	left    int     // nodes not finished
	stack   []int32 // scratch for finish
}

const (
	// notOK marks a pending count: a blocker did not succeed.
	notOK = 1 << 30
	// returned is the unit of the high half of busy.
	returned = 1 << 32
	// quickNode is the duration under which a node costs less than the
	// scheduler's bookkeeping around it and a handoff between workers.
	quickNode = 50 * time.Microsecond
)

func newRun[ID comparable](ctx context.Context, g *Graph[ID], opts RunOptions, res *Result[ID]) *run[ID] {
	n := len(g.ids)
	limit := n
	if opts.MaxParallel > 0 && opts.MaxParallel < n {
		limit = opts.MaxParallel
	}
	s := &run[ID]{
		ctx:     ctx,
		done:    ctx.Done(),
		g:       g,
		deps:    g.dependents(),
		start:   res.Start,
		limit:   int32(limit),
		procs:   int32(runtime.GOMAXPROCS(0)),
		nodes:   res.Nodes,
		wake:    make(chan int32, limit),
		pending: make([]int32, n),
		queue:   make([]int32, 0, n),
		left:    n,
	}
	for i := range int32(n) {
		s.pending[i] = g.blockerStart[i+1] - g.blockerStart[i]
		if s.pending[i] == 0 {
			s.queue = append(s.queue, i)
		}
	}
	return s
}

// begin hands the first runnable node to a new worker, which spreads the
// rest.
func (s *run[ID]) begin() {
	s.mu.Lock()
	first := s.claim()
	if first >= 0 {
		s.handoffs.Add(1)
	}
	last := s.left == 0 // ctx was done already: every node got canceled
	s.mu.Unlock()
	if first >= 0 {
		s.wg.Add(1)
		go s.worker(first)
	}
	if last {
		close(s.wake)
	}
}

// worker runs node i, then the nodes it takes or is handed, until the run is
// over.
func (s *run[ID]) worker(i int32) {
	defer s.wg.Done()
	for {
		s.handoffs.Add(-1)
		s.mu.Lock()
		extra, wakes := s.spread()
		s.mu.Unlock()
		s.dispatch(extra, wakes)
		var last time.Time // end of the node run before, zero for none
		for i >= 0 {
			outcome, err := s.exec(i, last)
			last = s.nodes[i].End
			i = s.complete(i, outcome, err, true)
		}
		var ok bool
		if i, ok = <-s.wake; !ok {
			return
		}
	}
}

// exec calls the function of node i unless the run is canceled. If the
// worker ran another node just before, last is its end: it is also the start
// of node i (unless i became runnable later), which saves a clock read at the
// cost of counting the bookkeeping in between, well under a microsecond, as
// part of node i.
func (s *run[ID]) exec(i int32, last time.Time) (Outcome, error) {
	if s.canceled() {
		s.busy.Add(returned)
		return Canceled, nil
	}
	r := &s.nodes[i]
	switch {
	case last.IsZero():
		r.Start = s.now()
	case last.Sub(s.start) < r.Wait:
		r.Start = s.start.Add(r.Wait)
	default:
		r.Start = last
	}
	s.busy.Add(1)
	err := s.call(i)
	s.busy.Add(returned - 1)
	r.End = s.now()
	if err != nil {
		return Failed, err
	}
	return Succeeded, nil
}

// call calls the function of node i, turning a panic into a *PanicError. If
// the function calls runtime.Goexit, call finishes the node itself and hands
// the worker's next node to a new worker, as this one is exiting.
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
		s.busy.Add(returned - 1)
		s.nodes[i].End = s.now()
		if next := s.complete(i, Failed, ErrGoexit, false); next >= 0 {
			s.handoffs.Add(1)
			s.wg.Add(1)
			go s.worker(next)
		}
	}()
	err = s.g.funcs[i](s.ctx)
	normal = true
	return err
}

// complete finishes node i with its outcome, then takes the next node for the
// calling worker and hands out more if useful. It returns the worker's next
// node, or -1; then, if park is set, the worker is counted as parked and must
// wait on wake.
func (s *run[ID]) complete(i int32, outcome Outcome, err error, park bool) int32 {
	s.mu.Lock()
	busy := s.busy.Add(-returned)
	s.active--
	s.finish(i, outcome, err)
	next := int32(-1)
	var extra []int32
	var wakes int
	if !park || !s.crowded(busy, s.nodes[i].Duration()) {
		next = s.claim()
		extra, wakes = s.spread()
	}
	if next < 0 && park && s.left > 0 {
		s.idle++
	}
	last := s.left == 0
	s.mu.Unlock()
	s.dispatch(extra, wakes)
	if last {
		close(s.wake)
	}
	return next
}

// finish records the outcome of node i and releases its dependents: one whose
// blockers are all finished is queued if they all succeeded, else it is
// finished as Blocked or Canceled, which cascades. Caller holds mu.
func (s *run[ID]) finish(i int32, outcome Outcome, err error) {
	s.nodes[i].Outcome, s.nodes[i].Err = outcome, err
	stack := s.stack[:0]
	for {
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
				s.nodes[d].Wait = s.nodes[i].End.Sub(s.start)
				s.queue = append(s.queue, d)
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
	s.stack = stack
}

// skip records why node d, whose blockers are finished, cannot run: Blocked
// by the failed ancestor behind its first failed or blocked blocker, else
// Canceled. Caller holds mu.
func (s *run[ID]) skip(d int32) {
	r := &s.nodes[d]
	r.Outcome = Canceled
	for _, b := range s.g.blockersOf(d) {
		switch br := &s.nodes[b]; br.Outcome {
		case Failed:
			r.Outcome, r.BlockedBy = Blocked, br.ID
			return
		case Blocked:
			r.Outcome, r.BlockedBy = Blocked, br.BlockedBy
			return
		}
	}
}

// claim takes the oldest queued node if a slot is free, or returns -1. Once
// the run is canceled it finishes the queued nodes as Canceled instead.
// Caller holds mu.
func (s *run[ID]) claim() int32 {
	if s.head == len(s.queue) || s.active >= s.limit {
		return -1
	}
	if s.canceled() {
		for s.head < len(s.queue) {
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
// the queue (its node returned, or it was handed a node and has not started).
// Without this, workers added in case nodes block would only contend for the
// lock when nodes return at once. Caller holds mu.
func (s *run[ID]) crowded(busy int64, took time.Duration) bool {
	inFn, back := int32(busy), int32(busy>>32)
	return took < quickNode && s.active-inFn >= s.procs && (back > 0 || s.handoffs.Load() > 0)
}

// spread is called by a worker about to run a node, which may block. It
// takes queued nodes for other workers so that, counting the nodes already
// handed out, there is one for each node inside its function (which may be
// blocked too), and at least one if no worker is on its way back to take
// more: workers multiply while nodes block and stay few while nodes return
// at once. It returns the nodes taken and how many of them go to parked
// workers; the rest need new workers. Caller holds mu.
func (s *run[ID]) spread() (extra []int32, wakes int) {
	busy := s.busy.Load()
	want := int32(busy)
	if busy>>32 == 0 {
		want = max(want, 1)
	}
	h0 := s.head // claims are contiguous from h0; a cancel drains after them
	inFlight := s.handoffs.Load()
	k := int32(0)
	for inFlight+k < want {
		if s.claim() < 0 {
			break
		}
		k++
	}
	if k == 0 {
		return nil, 0
	}
	s.handoffs.Add(k)
	w := min(k, s.idle)
	s.idle -= w
	return s.queue[h0 : h0+int(k)], int(w)
}

// dispatch hands the first wakes nodes to parked workers and starts a new
// worker for each of the others.
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

// now returns the current time. It reads only the monotonic clock, which
// costs half of time.Now.
func (s *run[ID]) now() time.Time { return s.start.Add(time.Since(s.start)) }

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
