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

	"github.com/kdag-dev/kdag/pkg/localcluster"
)

func main() {
	// Its own flag set: no imported package can register a clashing name on it.
	fs := flag.NewFlagSet("devcluster", flag.ExitOnError)
	name := fs.String("name", "kdag", "name of the local cluster")
	kubeconfig := fs.String("kubeconfig", "bin/kubeconfig-kdag", "where `up` writes the cluster's kubeconfig")
	nodes := fs.Int("nodes", 2, "number of fake nodes")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: devcluster [flags] up|down\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(os.Args[1:]) // ExitOnError: -h exits 0, a bad flag 2

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := localcluster.Options{Name: *name, Nodes: *nodes, Log: os.Stdout}

	var err error
	switch fs.Arg(0) {
	case "up":
		err = up(ctx, opts, *kubeconfig)
	case "down":
		err = localcluster.Delete(ctx, opts)
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func up(ctx context.Context, opts localcluster.Options, kubeconfig string) error {
	start := time.Now()
	c, err := localcluster.Start(ctx, opts)
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
