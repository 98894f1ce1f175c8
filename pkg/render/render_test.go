package render_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/kdag-dev/kdag/pkg/render"
)

var styles = []render.Style{{State: "ok", Fill: "#b7e1b0"}, {State: "failed", Fill: "#f4a6a6"}}

func TestWrite(t *testing.T) {
	plain := render.Graph{Nodes: []render.Node{
		{Label: "ns"},
		{Label: `app "v1"`, Blockers: []int32{0}},
		{Label: "web", Blockers: []int32{1, 0}},
	}}
	states := render.Graph{Title: `App/a"b`, Styles: styles, Nodes: []render.Node{
		{Label: "db", State: "failed"},
		{Label: "x<&#>y", State: "other", Blockers: []int32{0, 7, -1}}, // 7 and -1: no edge
	}}
	// An inferred dependency (issue 15) is drawn dashed; a Dashed index that is no blocker
	// draws nothing.
	dashed := render.Graph{Nodes: []render.Node{
		{Label: "config"},
		{Label: "key"},
		{Label: "web", Blockers: []int32{0, 1}, Dashed: []int32{0, 5}},
	}}
	// The critical path (issue 15): bold nodes and thick edges, an inferred one still dashed.
	bold := render.Graph{Styles: styles, Nodes: []render.Node{
		{Label: "config", State: "ok", Bold: true},
		{Label: "key"},
		{Label: "web", State: "ok", Blockers: []int32{1, 0}, Dashed: []int32{0}, BoldEdges: []int32{0}, Bold: true},
		{Label: "job", Blockers: []int32{2}, BoldEdges: []int32{2}, Bold: true},
	}}
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer, render.Graph) error
		g     render.Graph
		want  string
	}{
		{"DOT", write(render.WriteDOT), plain, `
digraph {
  node [shape=box];
  n0 [label="ns"];
  n1 [label="app \"v1\""];
  n2 [label="web"];
  n0 -> n1;
  n1 -> n2;
  n0 -> n2;
}
`},
		{"DOT with title and states", write(render.WriteDOT), states, `
digraph {
  label="App/a\"b";
  labelloc=t;
  node [shape=box];
  n0 [label="db\nfailed", style=filled, fillcolor="#f4a6a6"];
  n1 [label="x<&#>y\nother", style=filled, fillcolor="#ffffff"];
  n0 -> n1;
}
`},
		{"Mermaid", write(render.WriteMermaid), plain, `
flowchart TD
  n0["ns"]
  n1["app #quot;v1#quot;"]
  n2["web"]
  n0 --> n1
  n1 --> n2
  n0 --> n2
`},
		{"Mermaid with title and states", write(render.WriteMermaid), states, `
---
title: "App/a\"b"
---
flowchart TD
  n0["db<br/>failed"]:::failed
  n1["x#lt;#amp;#35;#gt;y<br/>other"]:::other
  n0 --> n1
  classDef ok fill:#b7e1b0
  classDef failed fill:#f4a6a6
`},
		{"DOT with dashed edges", write(render.WriteDOT), dashed, `
digraph {
  node [shape=box];
  n0 [label="config"];
  n1 [label="key"];
  n2 [label="web"];
  n0 -> n2 [style=dashed];
  n1 -> n2;
}
`},
		{"Mermaid with dashed edges", write(render.WriteMermaid), dashed, `
flowchart TD
  n0["config"]
  n1["key"]
  n2["web"]
  n0 -.-> n2
  n1 --> n2
`},
		{"DOT bold", write(render.WriteDOT), bold, `
digraph {
  node [shape=box];
  n0 [label="config\nok", style=filled, fillcolor="#b7e1b0", penwidth=3];
  n1 [label="key"];
  n2 [label="web\nok", style=filled, fillcolor="#b7e1b0", penwidth=3];
  n3 [label="job", penwidth=3];
  n1 -> n2;
  n0 -> n2 [style=dashed, penwidth=3];
  n2 -> n3 [penwidth=3];
}
`},
		{"Mermaid bold", write(render.WriteMermaid), bold, `
flowchart TD
  n0["config<br/>ok"]:::ok
  n1["key"]
  n2["web<br/>ok"]:::ok
  n3["job"]
  n1 --> n2
  n0 -.-> n2
  n2 --> n3
  classDef ok fill:#b7e1b0
  classDef failed fill:#f4a6a6
  classDef bold stroke:#000,stroke-width:3px
  class n0,n2,n3 bold
  linkStyle 1,2 stroke-width:3px
`},
		{"empty DOT", write(render.WriteDOT), render.Graph{}, `
digraph {
  node [shape=box];
}
`},
		{"empty Mermaid", write(render.WriteMermaid), render.Graph{}, `
flowchart TD
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first, second bytes.Buffer
			if err := tc.write(&first, tc.g); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(&second, tc.g); err != nil {
				t.Fatal(err)
			}
			if want := strings.TrimPrefix(tc.want, "\n"); first.String() != want {
				t.Errorf("got\n%s\nwant\n%s", first.String(), want)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Error("two renderings differ")
			}
		})
	}
}

func write(f func(w io.Writer, g render.Graph) error) func(*bytes.Buffer, render.Graph) error {
	return func(b *bytes.Buffer, g render.Graph) error { return f(b, g) }
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWrite_WriterError(t *testing.T) {
	g := render.Graph{Nodes: []render.Node{{Label: "x"}}}
	if err := render.WriteDOT(failingWriter{}, g); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteDOT(failing writer) = %v, want disk full", err)
	}
	if err := render.WriteMermaid(failingWriter{}, g); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteMermaid(failing writer) = %v, want disk full", err)
	}
}
