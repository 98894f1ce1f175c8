package graph

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/pkg/errors"
)

// RenderOptions configures WriteDOT and WriteMermaid.
type RenderOptions[ID comparable] struct {
	// Label returns the text shown for a node. Default: fmt.Sprint(id).
	Label func(ID) string
}

// WriteDOT writes the graph in Graphviz DOT to w. Nodes are named n0, n1, ...
// in insertion order and labeled with their ID; edges go from blocker to
// dependent. If res is not nil, each label also shows the node's outcome and
// the node is filled with the outcome's color. The output depends only on
// the graph, res and the labels: the same input gives the same bytes.
//
// It returns an error wrapping ErrResultMismatch if res is not a result of
// this graph, and the error of w if writing fails.
func (g *Graph[ID]) WriteDOT(w io.Writer, res *Result[ID], opts RenderOptions[ID]) error {
	if err := g.checkResult(res); err != nil {
		return err
	}
	label := labelFunc(opts)
	// Backslash starts escapes in DOT strings: \n is a line break.
	escape := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "").Replace
	var b bytes.Buffer
	b.WriteString("digraph {\n  node [shape=box];\n")
	for i, id := range g.ids {
		text := label(id)
		if res == nil {
			fmt.Fprintf(&b, "  n%d [label=\"%s\"];\n", i, escape(text))
			continue
		}
		o := res.Nodes[i].Outcome
		fmt.Fprintf(&b, "  n%d [label=\"%s\\n%s\", style=filled, fillcolor=\"%s\"];\n",
			i, escape(text), o, o.color())
	}
	g.writeEdges(&b, "  n%d -> n%d;\n")
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return errors.Wrap(err, "graph: write DOT")
}

// WriteMermaid writes the graph as a Mermaid flowchart to w. Nodes are named
// n0, n1, ... in insertion order and labeled with their ID; edges go from
// blocker to dependent. If res is not nil, each label also shows the node's
// outcome and the node gets the outcome as its class, styled by classDef
// lines. The same input gives the same bytes.
//
// It returns an error wrapping ErrResultMismatch if res is not a result of
// this graph, and the error of w if writing fails.
func (g *Graph[ID]) WriteMermaid(w io.Writer, res *Result[ID], opts RenderOptions[ID]) error {
	if err := g.checkResult(res); err != nil {
		return err
	}
	label := labelFunc(opts)
	// Mermaid reads #name; as an entity and labels as HTML.
	escape := strings.NewReplacer(`#`, `#35;`, `"`, `#quot;`, `<`, `#lt;`, `>`, `#gt;`, `&`, `#amp;`, "\n", `<br/>`, "\r", "").Replace
	var b bytes.Buffer
	b.WriteString("flowchart TD\n")
	for i, id := range g.ids {
		text := escape(label(id))
		if res == nil {
			fmt.Fprintf(&b, "  n%d[\"%s\"]\n", i, text)
			continue
		}
		o := res.Nodes[i].Outcome
		fmt.Fprintf(&b, "  n%d[\"%s<br/>%s\"]:::%s\n", i, text, o, o)
	}
	g.writeEdges(&b, "  n%d --> n%d\n")
	if res != nil {
		for _, o := range Outcomes() {
			fmt.Fprintf(&b, "  classDef %s fill:%s\n", o, o.color())
		}
	}
	_, err := w.Write(b.Bytes())
	return errors.Wrap(err, "graph: write Mermaid")
}

// writeEdges writes one line per edge, by dependent in insertion order, then
// by blocker in the order given to AddNode.
func (g *Graph[ID]) writeEdges(b *bytes.Buffer, format string) {
	for i := range int32(len(g.ids)) {
		for _, blocker := range g.blockersOf(i) {
			fmt.Fprintf(b, format, blocker, i)
		}
	}
}

func (g *Graph[ID]) checkResult(res *Result[ID]) error {
	if res == nil {
		return nil
	}
	if len(res.Nodes) != len(g.ids) {
		return errors.Wrapf(ErrResultMismatch, "graph: result has %d nodes, graph has %d", len(res.Nodes), len(g.ids))
	}
	for i := range res.Nodes {
		if res.Nodes[i].ID != g.ids[i] {
			return errors.Wrapf(ErrResultMismatch, "graph: result node %d is %v, graph node is %v", i, res.Nodes[i].ID, g.ids[i])
		}
	}
	return nil
}

// color is the fill color of the outcome in both renderings.
func (o Outcome) color() string {
	switch o {
	case Succeeded:
		return "#b7e1b0"
	case Failed:
		return "#f4a6a6"
	case Blocked:
		return "#d9d9d9"
	case Canceled:
		return "#f6e3a1"
	default:
		return "#ffffff"
	}
}

func labelFunc[ID comparable](opts RenderOptions[ID]) func(ID) string {
	if opts.Label != nil {
		return opts.Label
	}
	return func(id ID) string { return fmt.Sprint(id) }
}
