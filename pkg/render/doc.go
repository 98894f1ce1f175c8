// Package render draws a dependency graph as Graphviz DOT or as a Mermaid flowchart. It is the
// one drawing of kdag: pkg/graph's WriteDOT and WriteMermaid, the offline plan (pkg/plan,
// plan.Plan) and `kubectl kdag` all fill a Graph and call WriteDOT or WriteMermaid, so the
// three look alike and escape labels the same way.
//
// A Graph lists its nodes in drawing order; node i is named n<i>, and its Blockers are indices
// of earlier or later nodes. Edges go from blocker to dependent, written by dependent in node
// order, then in the order of its Blockers; an edge from a blocker the node lists in Dashed is
// dashed (DOT style=dashed, Mermaid -.->): kdag draws so the dependencies it inferred from
// references. A node marked Bold, and an edge from a blocker its node lists in BoldEdges, are
// drawn thick (DOT penwidth=3; Mermaid a "bold" class and linkStyle): kdag draws so the last
// reconcile's critical path. A node with a State shows it on a second line and is filled with
// the color its Style gives that state. The same Graph always gives the same bytes.
//
//	g := render.Graph{Title: "App/demo", Nodes: []render.Node{
//		{Label: "Secret demo"},
//		{Label: "Job \"migrate\"", Blockers: []int32{0}},
//	}}
//	if err := render.WriteDOT(os.Stdout, g); err != nil {
//		panic(err)
//	}
//
// Labels are escaped for each format: DOT's backslash escapes, Mermaid's #name; entities.
package render
