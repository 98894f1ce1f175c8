// Package controllertest is kdag's test kit for operator authors: what a test of a
// ResourceManager needs, so that a component's test reads like its scenario.
//
//   - AssertPlan compares a plan.Plan with a golden file in testdata; go test -update
//     rewrites it, and a difference prints the command that does, runnable from the module root.
//   - APIServer is a real kube-apiserver (envtest) shared by a test package's tests and started
//     by the first test that needs one, so the package's pure tests need no binaries.
//   - Start runs components under a real manager in a namespace of their own (cache scoped as
//     the operator's, start-up RBAC check, watches), and returns a Harness: Create, Get, Update,
//     Delete, WaitExists, WaitGone, MarkReady (envtest runs no Deployment, StatefulSet, Job or
//     volume controller), CollectGarbage (nor a garbage collector), WaitReady and WaitCondition
//     on the owner's kdag conditions, Writes, Reads and Events recorded.
//   - StartWith varies the harness (Options): Stepped, for a test that decides when reconciles
//     happen (Reconcile runs one and returns its result; the queue's requests are dropped), more
//     cached namespaces, a resync period, a transport or config of its own (a latency proxy);
//     Restart replaces the manager as a restarted process would.
//   - RunCases runs table-driven cases on the API server: given these live objects and this
//     owner, expect this condition and these writes.
//   - Graph fakes what a StatusReporter reads of a reconcile's report, for unit tests of status
//     logic.
//   - ExploreCrashes kills the operator at each of its writes in turn while a scenario drives
//     owners (create, change, delete), starts a fresh operator each time, and checks that the
//     owners end Ready (or gone), that a further pass writes nothing, and that nothing was lost
//     or redone: no kept object deleted, no object created again, no Secret's data changed, no
//     spec rewritten, no completed Job run again, more than in a run without the crash.
//
// # Crash points
//
// A crash-point exploration (ExploreCrashes) first runs the scenario with one manager and counts
// its writes (POST, PUT, PATCH, DELETE; events aside): each is a crash point. Then it runs the
// scenario again, in a new namespace, once per crash point N: the manager's N-th write reaches
// the API server, nothing after it is sent, the manager's context is canceled, and a fresh
// manager, with its own cache and queue, takes over while the scenario goes on. A failure names
// the crash point and its write, and the subtest is named after it:
//
//	--- FAIL: TestHello_SurvivesACrashAtEveryWrite/after_write_2
//	    after write 2: PATCH /apis/apps/v1/namespaces/x/deployments/site
//	        Deployment/site: spec written more often: generation 3, the clean run ends at 2
//
// A scenario is written like any harness test, with waits only (WaitExists, MarkReady,
// WaitReady, WaitGone, Eventually): a manager may die at any of its writes, so nothing may be
// expected within a time. Setup brings the namespace where the scenario starts (an owner
// deployed, for an upgrade) without crash points. Stride and Points bound the time of a long
// scenario: a regression test is the one crash point where a failure was found. Parallel runs
// several crash runs at once, each in its own namespace with its own managers: a crash run
// mostly waits, so four at once explore every point about three times as fast on 2 cores. Mode chooses
// the write never sent (CrashBeforeWrite) or answered 409 (ConflictAtWrite) instead. Components
// are shared by the managers, unless NewComponents makes each manager's own: then what a
// ResourceManager remembers between reconciles is lost at a crash, as in a real process. A
// scenario that moves owners between shards gives Shards, ShardComponents and ShardLayer: every run has one
// manager per shard, the crash points are the writes of all of them, and the one that makes the
// crash point's write dies and is replaced by a fresh manager of its shard.
//
// The README tutorial's test (examples/hello) shows a whole component test in 30 lines. The
// package is separate from pkg/controller so that production code never imports a test library;
// it registers the -update flag, so a test package that imports it must not declare its own.
package controllertest
