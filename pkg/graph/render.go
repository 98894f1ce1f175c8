package graph

import (
	"fmt"
	"io"

	"github.com/pkg/errors"

	"github.com/kdag-dev/kdag/pkg/render"
)

// RenderOptions configures WriteDOT and WriteMermaid.
type RenderOptions[ID comparable] struct {
	// Label returns the text shown for a node. Default: fmt.Sprint(id).
	Label func(ID) string
	// Dashed reports whether the edge from blocker to dependent is drawn dashed (kdag draws so
	// the dependencies it inferred from references). Default nil: every edge solid.
	Dashed func(blocker, dependent ID) bool
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
	d, err := g.drawing(res, opts)
	if err != nil {
		return err
	}
	return errors.Wrap(render.WriteDOT(w, d), "graph: write DOT")
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
	d, err := g.drawing(res, opts)
	if err != nil {
		return err
	}
	return errors.Wrap(render.WriteMermaid(w, d), "graph: write Mermaid")
}

// drawing returns the graph (and res's outcomes, when res is not nil) for pkg/render.
func (g *Graph[ID]) drawing(res *Result[ID], opts RenderOptions[ID]) (render.Graph, error) {
	if err := g.checkResult(res); err != nil {
		return render.Graph{}, err
	}
	label := labelFunc(opts)
	d := render.Graph{Nodes: make([]render.Node, len(g.ids))}
	for i, id := range g.ids {
		d.Nodes[i] = render.Node{Label: label(id), Blockers: g.blockersOf(int32(i))}
		if opts.Dashed != nil {
			for _, bl := range d.Nodes[i].Blockers {
				if opts.Dashed(g.ids[bl], id) {
					d.Nodes[i].Dashed = append(d.Nodes[i].Dashed, bl)
				}
			}
		}
		if res != nil {
			d.Nodes[i].State = res.Nodes[i].Outcome.String()
		}
	}
	if res != nil {
		for _, o := range Outcomes() {
			d.Styles = append(d.Styles, render.Style{State: o.String(), Fill: o.color()})
		}
	}
	return d, nil
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
