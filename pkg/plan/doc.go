// Package plan renders, without a cluster, what a kdag operator would build: the graph of every
// owner in a file and of each child owner its graph creates, from the same AddResources code the
// controllers run (controller.Component.Plan).
//
// It gives any kdag operator a `plan -f FILE [-o text|mermaid|dot|yaml] [-n NAMESPACE]` command:
// when os.Args[1] is "plan", the operator's main passes the other arguments to Run with its
// scheme (its types and the built-in ones), its components and its CRD manifests (an embed.FS),
// as operator.Plan does (and operator.Main, for `NAME plan ...`):
//
//	return plan.Run(ctx, args, out, plan.Options{
//		Scheme: opts.Scheme, Components: components, CRDs: opts.CRDs, RESTConfig: opts.RESTConfig,
//	})
//
// The main types are Options, which name the operator's components, scheme and CRDs, and
// Planner, which decodes owners from YAML (Decode), walks an owner and its children (Walk) and
// writes their plans in a Format (Write). Owners are defaulted with their CRD's structural
// schema as the API server would, so a plan of a sample shows what the cluster would get. An
// object of a kind no component reconciles is skipped. Secret values are never printed: the
// yaml output (Plan.WriteText) shows placeholders. The drawings come from pkg/render,
// like pkg/graph's and `kubectl kdag`'s.
//
// With --live the command asks a cluster what applying would change: `plan --live TYPE/NAME` for
// an owner on the cluster, `plan --live -f FILE` for a spec not applied yet (Resolve).
// Planner.Changes builds each node's object as the apply engine would get it
// (Plan.Render), dry-runs kdag's server-side apply (client.DryRunAll) and classifies
// it: Create, Update (with a diff), Unchanged, Recreate, Refused, and, for objects the graph no
// longer holds, Prune or Keep. Nothing is written. WriteChanges prints the changes as text, yaml
// or json; ExitCode gives kubectl diff's exit status. An owner of a file is first dry-run itself
// (DryRunOwner): a spec the API server refuses is reported as the owner's (OwnerRefusedError,
// OwnerChanges.Error), and nothing under it is planned.
//
// `plan --live --all [-n NAMESPACE | -A] [-l SELECTOR] [--details]` is the fleet plan: the live
// plan of every owner of the components' kinds (ListOwners, Fleet, bounded), summarised by owner
// (Summarize, WriteFleet: owners per action, the fields that change most, every Recreate, Refused
// object and error), for a platform team about to roll out a new operator version. FleetStatus
// gives its exit status, kubectl diff's.
package plan
