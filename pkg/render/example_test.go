package render_test

import (
	"os"

	"github.com/kdag-dev/kdag/pkg/render"
)

func ExampleWriteMermaid() {
	g := render.Graph{
		Nodes: []render.Node{
			{Label: "ConfigMap app", State: "ready"},
			{Label: "Deployment app", State: "waiting", Blockers: []int32{0}},
		},
		Styles: []render.Style{{State: "ready", Fill: "#b7e1b0"}, {State: "waiting", Fill: "#b9d7f0"}},
	}
	if err := render.WriteMermaid(os.Stdout, g); err != nil {
		panic(err)
	}
	// Output:
	// flowchart TD
	//   n0["ConfigMap app<br/>ready"]:::ready
	//   n1["Deployment app<br/>waiting"]:::waiting
	//   n0 --> n1
	//   classDef ready fill:#b7e1b0
	//   classDef waiting fill:#b9d7f0
}

func ExampleWriteDOT() {
	g := render.Graph{Title: "App/demo", Nodes: []render.Node{
		{Label: "Secret demo"},
		{Label: "Job \"migrate\"", Blockers: []int32{0}},
	}}
	if err := render.WriteDOT(os.Stdout, g); err != nil {
		panic(err)
	}
	// Output:
	// digraph {
	//   label="App/demo";
	//   labelloc=t;
	//   node [shape=box];
	//   n0 [label="Secret demo"];
	//   n1 [label="Job \"migrate\""];
	//   n0 -> n1;
	// }
}
