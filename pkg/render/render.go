package render

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/pkg/errors"
)

// Graph is what WriteDOT and WriteMermaid draw.
type Graph struct {
	// Title is shown above the drawing (Mermaid front matter, DOT graph label). Default "": none.
	Title string
	// Nodes in drawing order: node i is named n<i>.
	Nodes []Node
	// Styles are the fill colors of the node states, in the order Mermaid's classDef lines are
	// written. Default nil: no classDef line, and a node with a State is filled white in DOT.
	Styles []Style
}

// Node is one node of a Graph.
type Node struct {
	// Label is the node's text; it may hold any character, newlines included.
	Label string
	// State, when not "", is shown on a second line; it is the node's Mermaid class and picks
	// its fill color from the Graph's Styles. Default "": one line, not filled.
	State string
	// Blockers are the indices of the nodes this one waits for, each drawn as an edge to this
	// node in this order. An index out of range (a corrupt status) draws no edge.
	Blockers []int32
	// Dashed are the Blockers whose edges are drawn dashed: kdag draws so the dependencies it
	// inferred from references. Default nil: every edge solid.
	Dashed []int32
	// Bold draws the node with a thick border (DOT penwidth=3, Mermaid class bold): kdag draws so
	// the nodes of the owner's last critical path. Default false.
	Bold bool
	// BoldEdges are the Blockers whose edges are drawn thick (DOT penwidth=3, Mermaid linkStyle
	// stroke-width:3px), dashed or not: kdag draws so the critical path's edges. Default nil.
	BoldEdges []int32
}

// Style is the fill color of the nodes in one state.
type Style struct {
	// State is the Node.State the style applies to (a Mermaid class name: no spaces).
	State string
	// Fill is a color both formats read, such as "#b7e1b0".
	Fill string
}

// defaultFill fills a DOT node whose state has no Style.
const defaultFill = "#ffffff"

var (
	// DOT strings: a backslash starts an escape, \n is a line break.
	dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")
	// Mermaid reads #name; as an entity and labels as HTML.
	mermaidEscaper = strings.NewReplacer(`#`, `#35;`, `"`, `#quot;`, `<`, `#lt;`, `>`, `#gt;`, `&`, `#amp;`, "\n", `<br/>`, "\r", "")
)

// escapeDOT returns s as the inside of a DOT double-quoted string.
func escapeDOT(s string) string { return dotEscaper.Replace(s) }

// escapeMermaid returns s as the inside of a Mermaid double-quoted node label.
func escapeMermaid(s string) string { return mermaidEscaper.Replace(s) }

// WriteDOT writes g as a Graphviz digraph of boxes to w. It returns the error of w, if any.
func WriteDOT(w io.Writer, g Graph) error {
	var b bytes.Buffer
	b.WriteString("digraph {\n")
	if g.Title != "" {
		fmt.Fprintf(&b, "  label=\"%s\";\n  labelloc=t;\n", escapeDOT(g.Title))
	}
	b.WriteString("  node [shape=box];\n")
	for i, n := range g.Nodes {
		bold := ""
		if n.Bold {
			bold = ", penwidth=3"
		}
		if n.State == "" {
			fmt.Fprintf(&b, "  n%d [label=\"%s\"%s];\n", i, escapeDOT(n.Label), bold)
			continue
		}
		fmt.Fprintf(&b, "  n%d [label=\"%s\\n%s\", style=filled, fillcolor=\"%s\"%s];\n",
			i, escapeDOT(n.Label), escapeDOT(n.State), escapeDOT(g.fill(n.State)), bold)
	}
	g.edges(func(from, to int, dashed, bold bool) {
		var attrs []string
		if dashed {
			attrs = append(attrs, "style=dashed")
		}
		if bold {
			attrs = append(attrs, "penwidth=3")
		}
		if len(attrs) == 0 {
			fmt.Fprintf(&b, "  n%d -> n%d;\n", from, to)
			return
		}
		fmt.Fprintf(&b, "  n%d -> n%d [%s];\n", from, to, strings.Join(attrs, ", "))
	})
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return errors.WithStack(err)
}

// WriteMermaid writes g as a Mermaid top-down flowchart to w, with a classDef line per Style.
// It returns the error of w, if any.
func WriteMermaid(w io.Writer, g Graph) error {
	var b bytes.Buffer
	if g.Title != "" {
		// %q is a YAML double-quoted scalar for every title kdag draws (names and kinds).
		fmt.Fprintf(&b, "---\ntitle: %q\n---\n", g.Title)
	}
	b.WriteString("flowchart TD\n")
	for i, n := range g.Nodes {
		if n.State == "" {
			fmt.Fprintf(&b, "  n%d[\"%s\"]\n", i, escapeMermaid(n.Label))
			continue
		}
		fmt.Fprintf(&b, "  n%d[\"%s<br/>%s\"]:::%s\n", i, escapeMermaid(n.Label), escapeMermaid(n.State), n.State)
	}
	var boldEdges, boldNodes []string
	edge := 0
	g.edges(func(from, to int, dashed, bold bool) {
		arrow := "-->"
		if dashed {
			arrow = "-.->"
		}
		fmt.Fprintf(&b, "  n%d %s n%d\n", from, arrow, to)
		if bold {
			boldEdges = append(boldEdges, strconv.Itoa(edge))
		}
		edge++
	})
	for _, s := range g.Styles {
		fmt.Fprintf(&b, "  classDef %s fill:%s\n", s.State, s.Fill)
	}
	for i, n := range g.Nodes {
		if n.Bold {
			boldNodes = append(boldNodes, "n"+strconv.Itoa(i))
		}
	}
	if len(boldNodes) > 0 {
		fmt.Fprintf(&b, "  classDef bold stroke:#000,stroke-width:3px\n  class %s bold\n", strings.Join(boldNodes, ","))
	}
	if len(boldEdges) > 0 {
		fmt.Fprintf(&b, "  linkStyle %s stroke-width:3px\n", strings.Join(boldEdges, ","))
	}
	_, err := w.Write(b.Bytes())
	return errors.WithStack(err)
}

// edges calls edge once per edge, by dependent in node order, then in the order of its Blockers,
// with the blocker's and the dependent's indices and whether the dependent lists the blocker in
// Dashed and in BoldEdges; indices out of range are skipped.
func (g Graph) edges(edge func(from, to int, dashed, bold bool)) {
	for i, n := range g.Nodes {
		for _, bl := range n.Blockers {
			if bl < 0 || int(bl) >= len(g.Nodes) {
				continue
			}
			edge(int(bl), i, slices.Contains(n.Dashed, bl), slices.Contains(n.BoldEdges, bl))
		}
	}
}

// fill returns the fill color of state.
func (g Graph) fill(state string) string {
	for _, s := range g.Styles {
		if s.State == state {
			return s.Fill
		}
	}
	return defaultFill
}
