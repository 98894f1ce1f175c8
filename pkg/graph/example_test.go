package graph_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/kdag-dev/kdag/pkg/graph"
)

func Example() {
	apply := func(name string) graph.Func {
		return func(context.Context) error {
			fmt.Println("apply", name)
			return nil
		}
	}
	g := graph.New[string](graph.Options{})
	for _, err := range []error{
		g.AddNode("namespace", apply("namespace")),
		g.AddNode("configmap", apply("configmap"), "namespace"),
		g.AddNode("secret", func(context.Context) error { return errors.New("vault sealed") }, "namespace"),
		g.AddNode("deployment", apply("deployment"), "configmap", "secret"),
		g.AddNode("service", apply("service"), "namespace"),
	} {
		if err != nil {
			panic(err)
		}
	}

	// One node at a time: a node's first dependent runs right after it, the
	// other runnable nodes in the order they became runnable.
	res, err := g.Run(context.Background(), graph.RunOptions{MaxParallel: 1})
	fmt.Println("error:", err)
	for _, n := range res.Nodes {
		if n.Outcome == graph.Blocked {
			fmt.Println(n.ID, n.Outcome, "by", n.BlockedBy)
			continue
		}
		fmt.Println(n.ID, n.Outcome)
	}
	// Output:
	// apply namespace
	// apply configmap
	// apply service
	// error: node secret: vault sealed
	// namespace succeeded
	// configmap succeeded
	// secret failed
	// deployment blocked by secret
	// service succeeded
}
