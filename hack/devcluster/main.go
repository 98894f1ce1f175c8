// Command devcluster starts (or reuses) and deletes the local kwok cluster behind
// `make dev-cluster` and `make dev-cluster-delete`.
//
//	go run ./hack/devcluster -name kdag -kubeconfig bin/kubeconfig-kdag up|down
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/kdag-dev/kdag/pkg/testing/cluster"
)

func main() {
	name := flag.String("name", "kdag", "name of the local cluster")
	kubeconfig := flag.String("kubeconfig", "bin/kubeconfig-kdag", "where `up` writes the cluster's kubeconfig")
	nodes := flag.Int("nodes", 2, "number of fake nodes")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: devcluster [flags] up|down\n")
		flag.PrintDefaults()
	}
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := cluster.Options{Name: *name, Nodes: *nodes, Log: os.Stdout}

	var err error
	switch flag.Arg(0) {
	case "up":
		err = up(ctx, opts, *kubeconfig)
	case "down":
		err = cluster.Delete(ctx, opts)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, opts cluster.Options, kubeconfig string) error {
	start := time.Now()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	if err := c.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	fmt.Printf("==> local cluster %s ready in %s\n", c.Name, time.Since(start).Round(100*time.Millisecond))
	fmt.Printf("    export KUBECONFIG=%s    # then: kubectl get nodes, make run\n", kubeconfig)
	return nil
}
