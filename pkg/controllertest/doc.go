// Package controllertest is kdag's test kit for operator authors: what a test of a
// ResourceManager needs, so that a component's test reads like its scenario.
//
//   - AssertPlan compares a controller.Plan with a golden file in testdata; go test -update
//     rewrites it, and a difference prints the command that does, runnable from the module root.
//   - APIServer is a real kube-apiserver (envtest) shared by a test package's tests and started
//     by the first test that needs one, so the package's pure tests need no binaries.
//   - Start runs components under a real manager in a namespace of their own (cache scoped as
//     the operator's, start-up RBAC check, watches), and returns a Harness: Create, Get,
//     WaitExists, MarkReady (envtest runs no Deployment, StatefulSet, Job or volume controller),
//     WaitReady and WaitCondition on the owner's kdag conditions, Writes recorded.
//   - RunCases runs table-driven cases on the API server: given these live objects and this
//     owner, expect this condition and these writes.
//   - Graph fakes what a StatusReporter reads of a reconcile's report, for unit tests of status
//     logic.
//
// The README tutorial's test (examples/hello) shows a whole component test in 30 lines. The
// package is separate from pkg/controller so that production code never imports a test library;
// it registers the -update flag, so a test package that imports it must not declare its own.
package controllertest
