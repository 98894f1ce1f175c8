package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pkg/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/render"
)

// row is one line of the tree output.
type row struct {
	name, ready, state, message string
	critical                    bool // on the critical path: name carries criticalMarker
}

// criticalMarker follows the name of a node on its owner's last critical path in the tree; the
// legend line below the tree explains it.
const criticalMarker = " *"

// legend explains criticalMarker and the times of the nodes that carry it.
const legend = "* on the critical path of its owner's last reconcile (the chain of nodes that set its duration): " +
	"run = apply and readiness check, waited = for a free worker"

// writeTree prints the owner and its nodes like clusterctl describe: the owner's Ready
// condition, then each node in graph order with its state and, when the status gives one, why
// it is not ready; expanded nested owners are indented below their node. When the status has
// them, the owner's row says which node it is waiting for and for how long (until now), the last
// reconcile's duration and trace ID, and the nodes of each owner's last critical path are marked
// with criticalMarker and their times, explained by a legend line.
func writeTree(w io.Writer, t *ownerTree, now time.Time) error {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tREADY\tSTATE\tMESSAGE")
	rows := treeRows(t, now)
	critical := false
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.name, r.ready, r.state, r.message)
		critical = critical || r.critical
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(b.String()) {
		out.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	if critical {
		out.WriteString(legend + "\n")
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// treeRows returns the owner's row and its nodes' rows; now is the time waitingFor.since is
// measured to.
func treeRows(t *ownerTree, now time.Time) []row {
	cond := meta.FindStatusCondition(t.Status.Conditions, kdagv1alpha1.ConditionReady)
	ready, state, msg := metav1.ConditionUnknown, "", "not reconciled yet"
	if cond != nil {
		ready, state, msg = cond.Status, cond.Reason, cond.Message
	}
	var parts []string
	if w := t.Status.WaitingFor; w != nil && ready != metav1.ConditionTrue {
		parts = append(parts, waitingFor(w, now))
		if cond != nil && cond.Reason == kdagv1alpha1.ReasonWaiting {
			msg = "" // it lists the waiting nodes, whose rows say what each waits for
		}
	}
	if msg != "" {
		parts = append(parts, msg)
	}
	if l := t.Status.LastReconcile; l != nil {
		last := "last reconcile " + millis(l.DurationMillis).String()
		if l.TraceID != "" {
			last += ", trace " + l.TraceID
		}
		parts = append(parts, last)
	}
	msg = strings.Join(parts, "; ")
	if t.Generation > 0 && t.Status.ObservedGeneration != t.Generation {
		msg += fmt.Sprintf(" (status of generation %d, current is %d)", t.Status.ObservedGeneration, t.Generation)
	}
	rows := []row{{name: t.Kind + "/" + t.Name, ready: string(ready), state: state, message: oneLine(msg)}}
	return append(rows, nodeRows(t, "")...)
}

// waitingFor says which node w names and for how long, until now: "waiting for PostgreSQL
// default/demo-postgresql for 2m5s", with the state when it is not Waiting.
func waitingFor(w *kdagv1alpha1.WaitingFor, now time.Time) string {
	what := w.Kind + " " + w.Name
	if w.Namespace != "" {
		what = w.Kind + " " + w.Namespace + "/" + w.Name
	}
	if w.State != "" && w.State != kdagv1alpha1.NodeWaiting {
		what += " (" + string(w.State) + ")"
	}
	since := max(now.Sub(w.Since.Time), 0).Round(time.Second)
	return fmt.Sprintf("waiting for %s for %s", what, since)
}

// millis is ms milliseconds as a duration.
func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// pathTimes says how long a node of the critical path ran and waited: "run 120ms, waited 3ms"
// (no wait when it did not wait).
func pathTimes(p kdagv1alpha1.PathNode) string {
	s := "run " + millis(p.RunMillis).String()
	if p.WaitMillis > 0 {
		s += ", waited " + millis(p.WaitMillis).String()
	}
	return s
}

// withPath returns r marked as on the critical path with p's times before its message when pos
// is a position on the path (not -1), else r.
func withPath(r row, p kdagv1alpha1.PathNode, pos int) row {
	if pos < 0 {
		return r
	}
	r.name += criticalMarker
	r.critical = true
	r.message = strings.TrimSuffix(pathTimes(p)+"; "+r.message, "; ")
	return r
}

// nodeRows returns the rows of t's nodes, each prefixed by indent and its branch.
func nodeRows(t *ownerTree, indent string) []row {
	g := t.Status.Graph
	if g == nil {
		return nil
	}
	type item struct {
		r     row
		child *ownerTree
	}
	var items []item
	for i, n := range g.Nodes {
		r := row{name: nodeName(n.Kind, n.Namespace, n.Name, t.Namespace), ready: readyOf(n.State), state: string(n.State)}
		if s, ok := t.notReady(n); ok {
			r.message = oneLine(s.Message)
		}
		p, pos := t.pathNode(n.Group, n.Kind, n.Namespace, n.Name, false)
		items = append(items, item{r: withPath(r, p, pos), child: t.Children[i]})
	}
	if listed := int32(len(g.Nodes)); g.Total > listed {
		// A large graph (or an older operator) does not list its nodes: show the ones not
		// ready, then what the counts say about the rest.
		shown := int32(0)
		if listed == 0 {
			for _, s := range g.NotReady {
				p, pos := t.pathNode("", s.Kind, s.Namespace, s.Name, true)
				items = append(items, item{r: withPath(row{
					name:  nodeName(s.Kind, s.Namespace, s.Name, t.Namespace),
					ready: readyOf(s.State), state: string(s.State), message: oneLine(s.Message),
				}, p, pos)})
			}
			shown = int32(len(g.NotReady))
		}
		items = append(items, item{r: row{
			name:    fmt.Sprintf("... %d more nodes", g.Total-listed-shown),
			message: fmt.Sprintf("not listed in the status (at most %d are); %s", kdagv1alpha1.MaxGraphNodes, counts(g)),
		}})
	}
	var rows []row
	for i, it := range items {
		branch, next := "├─", "│ "
		if i == len(items)-1 {
			branch, next = "└─", "  "
		}
		it.r.name = indent + branch + it.r.name
		rows = append(rows, it.r)
		if it.child != nil {
			rows = append(rows, nodeRows(it.child, indent+next)...)
		}
	}
	return rows
}

// nodeName is Kind/name, with the namespace when it is not the owner's.
func nodeName(kind, namespace, name, ownerNamespace string) string {
	if namespace != "" && namespace != ownerNamespace {
		return fmt.Sprintf("%s/%s (namespace %s)", kind, name, namespace)
	}
	return kind + "/" + name
}

func readyOf(s kdagv1alpha1.NodeState) string {
	if s == kdagv1alpha1.NodeReady {
		return string(metav1.ConditionTrue)
	}
	return string(metav1.ConditionFalse)
}

// counts summarises the graph's counts: "120 nodes: 118 ready, 1 waiting, 1 failed".
func counts(g *kdagv1alpha1.GraphSummary) string {
	parts := []string{fmt.Sprintf("%d ready", g.Ready)}
	for _, c := range []struct {
		n    int32
		name string
	}{{g.Waiting, "waiting"}, {g.Failed, "failed"}, {g.Blocked, "blocked"}, {g.Canceled, "canceled"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	return fmt.Sprintf("%d nodes: %s", g.Total, strings.Join(parts, ", "))
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// stateColor is the fill color of a node state, in the palette of pkg/graph's renderings.
func stateColor(s kdagv1alpha1.NodeState) string {
	switch s {
	case kdagv1alpha1.NodeReady:
		return "#b7e1b0"
	case kdagv1alpha1.NodeWaiting:
		return "#b9d7f0"
	case kdagv1alpha1.NodeFailed:
		return "#f4a6a6"
	case kdagv1alpha1.NodeBlocked:
		return "#d9d9d9"
	case kdagv1alpha1.NodeCanceled:
		return "#f6e3a1"
	default:
		return "#ffffff"
	}
}

var nodeStates = []kdagv1alpha1.NodeState{kdagv1alpha1.NodeReady, kdagv1alpha1.NodeWaiting, kdagv1alpha1.NodeFailed, kdagv1alpha1.NodeBlocked, kdagv1alpha1.NodeCanceled}

// drawable returns the owner's listed nodes, or an error when the status does not list them all.
func drawable(t *ownerTree) ([]kdagv1alpha1.GraphNode, error) {
	g := t.Status.Graph
	if g == nil {
		return nil, nil
	}
	if int32(len(g.Nodes)) != g.Total {
		why := fmt.Sprintf("more than the %d its status lists", kdagv1alpha1.MaxGraphNodes)
		if !g.Truncated {
			why = "and its status does not list them (an operator built before kdag published nodes)"
		}
		return nil, errors.Errorf("%s %s has %d nodes, %s: use -o tree to see the ones not ready",
			t.Kind, t.Name, g.Total, why)
	}
	return g.Nodes, nil
}

// nodeEdges returns n's blockers and inferred blockers as indices into the listed nodes: from
// blockerIndices and inferredIndices, or from the lists an older kdag wrote. It returns
// NodeIndices.Indices' error for indices that do not parse.
func nodeEdges(n kdagv1alpha1.GraphNode) (blockers, inferred []int32, err error) {
	if n.Blockers == "" && len(n.DeprecatedBlockers) > 0 {
		return n.DeprecatedBlockers, n.DeprecatedInferred, nil
	}
	if blockers, err = n.Blockers.Indices(); err != nil {
		return nil, nil, err
	}
	inferred, err = n.Inferred.Indices()
	return blockers, inferred, err
}

// writeMermaid draws the owner's graph as a Mermaid flowchart (pkg/render, as pkg/graph's
// WriteMermaid): nodes n0, n1, ... in graph order, labeled Kind/name and state, classed by
// state; edges go from blocker to dependent, dotted when kdag inferred them from a reference
// (GraphNode.Inferred); the last reconcile's critical path is bold (class bold, thick
// edges).
func writeMermaid(w io.Writer, t *ownerTree) error {
	g, err := drawing(t)
	if err != nil {
		return err
	}
	return render.WriteMermaid(w, g)
}

// writeDOT draws the owner's graph in Graphviz DOT (pkg/render, as pkg/graph's WriteDOT),
// inferred edges dashed, the last reconcile's critical path bold (penwidth=3).
func writeDOT(w io.Writer, t *ownerTree) error {
	g, err := drawing(t)
	if err != nil {
		return err
	}
	return render.WriteDOT(w, g)
}

// drawing returns the owner's listed nodes for pkg/render, titled Kind/name, or an error when
// the status does not list them all. The nodes of the last reconcile's critical path, and the
// edges between consecutive ones, are bold. Blockers out of range (a corrupt status) draw no edge;
// indices that do not parse (NodeIndices) are an error naming the node. A status an older kdag
// wrote (DeprecatedBlockers, DeprecatedInferred) draws the same.
func drawing(t *ownerTree) (render.Graph, error) {
	nodes, err := drawable(t)
	if err != nil {
		return render.Graph{}, err
	}
	g := render.Graph{Title: t.Kind + "/" + t.Name, Nodes: make([]render.Node, len(nodes))}
	pos := make([]int, len(nodes)) // position of each node on the critical path, -1 if off it
	for i, n := range nodes {
		_, pos[i] = t.pathNode(n.Group, n.Kind, n.Namespace, n.Name, false)
	}
	for i, n := range nodes {
		blockers, inferred, err := nodeEdges(n)
		if err != nil {
			return render.Graph{}, errors.Wrapf(err, "%s %s: status.graph.nodes[%d] (%s) is not valid; "+
				"its operator rewrites it on the next reconcile, use -o tree meanwhile",
				t.Kind, t.Name, i, nodeName(n.Kind, n.Namespace, n.Name, t.Namespace))
		}
		g.Nodes[i].Label, g.Nodes[i].State = nodeName(n.Kind, n.Namespace, n.Name, t.Namespace), string(n.State)
		g.Nodes[i].Blockers, g.Nodes[i].Dashed, g.Nodes[i].Bold = blockers, inferred, pos[i] >= 0
		for _, b := range blockers {
			// An edge of the path joins a node to the one before it on the path.
			if pos[i] > 0 && b >= 0 && int(b) < len(nodes) && pos[b] == pos[i]-1 {
				g.Nodes[i].BoldEdges = append(g.Nodes[i].BoldEdges, b)
			}
		}
	}
	for _, s := range nodeStates {
		g.Styles = append(g.Styles, render.Style{State: string(s), Fill: stateColor(s)})
	}
	return g, nil
}
