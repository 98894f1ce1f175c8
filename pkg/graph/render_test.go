package graph_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kdag-dev/kdag/pkg/graph"
)

func renderGraph(t *testing.T) *graph.Graph[string] {
	g := graph.New[string](graph.Options{})
	mustAdd(t, g, "ns", noop)
	mustAdd(t, g, `app "v1"`, noop, "ns")
	mustAdd(t, g, "db", func(context.Context) error { return errors.New("down") }, "ns")
	mustAdd(t, g, "web", noop, `app "v1"`, "db")
	return g
}

// dashedToWeb dashes the edge from db to web only.
func dashedToWeb(blocker, dependent string) bool { return blocker == "db" && dependent == "web" }

func TestRender(t *testing.T) {
	g := renderGraph(t)
	res, _ := g.Run(context.Background(), graph.RunOptions{})
	tests := []struct {
		name   string
		render func(*bytes.Buffer) error
		want   string
	}{
		{
			name:   "DOT",
			render: func(b *bytes.Buffer) error { return g.WriteDOT(b, nil, graph.RenderOptions[string]{}) },
			want: `digraph {
  node [shape=box];
  n0 [label="ns"];
  n1 [label="app \"v1\""];
  n2 [label="db"];
  n3 [label="web"];
  n0 -> n1;
  n0 -> n2;
  n1 -> n3;
  n2 -> n3;
}
`,
		},
		{
			name:   "DOT with result",
			render: func(b *bytes.Buffer) error { return g.WriteDOT(b, res, graph.RenderOptions[string]{}) },
			want: `digraph {
  node [shape=box];
  n0 [label="ns\nsucceeded", style=filled, fillcolor="#b7e1b0"];
  n1 [label="app \"v1\"\nsucceeded", style=filled, fillcolor="#b7e1b0"];
  n2 [label="db\nfailed", style=filled, fillcolor="#f4a6a6"];
  n3 [label="web\nblocked", style=filled, fillcolor="#d9d9d9"];
  n0 -> n1;
  n0 -> n2;
  n1 -> n3;
  n2 -> n3;
}
`,
		},
		{
			name: "DOT with dashed edges",
			render: func(b *bytes.Buffer) error {
				return g.WriteDOT(b, nil, graph.RenderOptions[string]{Dashed: dashedToWeb})
			},
			want: `digraph {
  node [shape=box];
  n0 [label="ns"];
  n1 [label="app \"v1\""];
  n2 [label="db"];
  n3 [label="web"];
  n0 -> n1;
  n0 -> n2;
  n1 -> n3;
  n2 -> n3 [style=dashed];
}
`,
		},
		{
			name: "Mermaid with dashed edges",
			render: func(b *bytes.Buffer) error {
				return g.WriteMermaid(b, nil, graph.RenderOptions[string]{Dashed: dashedToWeb})
			},
			want: `flowchart TD
  n0["ns"]
  n1["app #quot;v1#quot;"]
  n2["db"]
  n3["web"]
  n0 --> n1
  n0 --> n2
  n1 --> n3
  n2 -.-> n3
`,
		},
		{
			name:   "Mermaid",
			render: func(b *bytes.Buffer) error { return g.WriteMermaid(b, nil, graph.RenderOptions[string]{}) },
			want: `flowchart TD
  n0["ns"]
  n1["app #quot;v1#quot;"]
  n2["db"]
  n3["web"]
  n0 --> n1
  n0 --> n2
  n1 --> n3
  n2 --> n3
`,
		},
		{
			name:   "Mermaid with result",
			render: func(b *bytes.Buffer) error { return g.WriteMermaid(b, res, graph.RenderOptions[string]{}) },
			want: `flowchart TD
  n0["ns<br/>succeeded"]:::succeeded
  n1["app #quot;v1#quot;<br/>succeeded"]:::succeeded
  n2["db<br/>failed"]:::failed
  n3["web<br/>blocked"]:::blocked
  n0 --> n1
  n0 --> n2
  n1 --> n3
  n2 --> n3
  classDef succeeded fill:#b7e1b0
  classDef failed fill:#f4a6a6
  classDef blocked fill:#d9d9d9
  classDef canceled fill:#f6e3a1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first, second bytes.Buffer
			if err := tt.render(&first); err != nil {
				t.Fatal(err)
			}
			if err := tt.render(&second); err != nil {
				t.Fatal(err)
			}
			if first.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", first.String(), tt.want)
			}
			if !bytes.Equal(first.Bytes(), second.Bytes()) {
				t.Error("two renderings differ")
			}
		})
	}
}

func TestRenderEscapesLabels(t *testing.T) {
	g := graph.New[int](graph.Options{})
	mustAdd(t, g, 1, noop)
	label := func(int) string { return "a\\b \"c\"\n#d <e> &f" }
	opts := graph.RenderOptions[int]{Label: label}

	var dot, mermaid strings.Builder
	if err := g.WriteDOT(&dot, nil, opts); err != nil {
		t.Fatal(err)
	}
	if err := g.WriteMermaid(&mermaid, nil, opts); err != nil {
		t.Fatal(err)
	}
	if want := `  n0 [label="a\\b \"c\"\n#d <e> &f"];`; !strings.Contains(dot.String(), want) {
		t.Errorf("DOT:\n%s\nwant line %s", dot.String(), want)
	}
	if want := `  n0["a\b #quot;c#quot;<br/>#35;d #lt;e#gt; #amp;f"]`; !strings.Contains(mermaid.String(), want) {
		t.Errorf("Mermaid:\n%s\nwant line %s", mermaid.String(), want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRenderErrors(t *testing.T) {
	g := renderGraph(t)
	other := graph.New[string](graph.Options{})
	mustAdd(t, other, "x", noop)
	foreign, _ := other.Run(context.Background(), graph.RunOptions{})
	opts := graph.RenderOptions[string]{}

	if err := g.WriteDOT(&bytes.Buffer{}, foreign, opts); !errors.Is(err, graph.ErrResultMismatch) {
		t.Errorf("WriteDOT(foreign result) = %v, want ErrResultMismatch", err)
	}
	if err := g.WriteMermaid(&bytes.Buffer{}, foreign, opts); !errors.Is(err, graph.ErrResultMismatch) {
		t.Errorf("WriteMermaid(foreign result) = %v, want ErrResultMismatch", err)
	}
	if err := g.WriteDOT(failingWriter{}, nil, opts); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteDOT(failing writer) = %v", err)
	}
	if err := g.WriteMermaid(failingWriter{}, nil, opts); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteMermaid(failing writer) = %v", err)
	}
}
