// Package cluster is the test side of the local cluster: pkg/localcluster starts it (the same code
// `make demo` and `make dev-cluster` run), and this package adds what only tests need, a namespace
// per test that is deleted when the test ends and a TestMain that starts and stops the cluster.
package cluster

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kdag-dev/kdag/pkg/localcluster"
	"github.com/kdag-dev/kdag/pkg/testing/internal/names"
)

// StorageClassName is the default StorageClass the cluster gets (localcluster.StorageClassName).
const StorageClassName = localcluster.StorageClassName

// Options configure Start: localcluster.Options.
type Options = localcluster.Options

// Cluster is a running local cluster with the test helpers.
type Cluster struct {
	*localcluster.Cluster
}

// Start is localcluster.Start: it returns the running cluster named opts.Name, starting or
// creating it first when needed.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Cluster{Cluster: c}, nil
}

// Delete is localcluster.Delete: it deletes the cluster named opts.Name if it exists.
func Delete(ctx context.Context, opts Options) error { return localcluster.Delete(ctx, opts) }

// Namespace creates a namespace named after the test (with a generated suffix) and returns its
// name. When the test ends it logs the namespace's Warning events if the test failed, then
// deletes the namespace; the cluster's namespace controller removes the objects inside. A failure
// to create it fails t.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	cs := c.Clientset()
	ns, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: names.DNSLabel(t.Name(), 50) + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logWarnings(t, ns.Name)
		}
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// logWarnings logs the Warning events of namespace ns, to explain a failed test.
func (c *Cluster) logWarnings(t testing.TB, ns string) {
	events, err := c.Clientset().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list events: %v", err)
		return
	}
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		line := fmt.Sprintf("event: %s %s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		if e.Count > 1 {
			line += fmt.Sprintf(" (x%d)", e.Count)
		}
		t.Log(line)
	}
}

// Main is the TestMain of an e2e package: it starts (or reuses) the cluster of opts, calls run
// with it (run calls m.Run and returns its code), stops the cluster if Main created it, and
// returns the exit code for os.Exit. A failure to start or stop is printed and returns 1. While
// run runs, a KubeletRetry brings kwok back to the pods it left half-way (logged to opts.Log).
func Main(opts Options, run func(c *Cluster) int) int {
	ctx := context.Background()
	c, err := Start(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := c.startKubeletRetry(opts.Log)
	code := run(c)
	stop()
	if err := c.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}
