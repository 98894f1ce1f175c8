// Package sharding runs the reference operator's binary as several processes with dynamic shards
// (--shards=auto, issue 17) against a local kwok cluster (pkg/testing/cluster) of its own, and
// checks what docs/sharding.md promises: every owner Ready and reconciled by one replica, a
// killed replica's owners taken over by the others, a new replica taking its share.
package sharding

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/test/internal/refop"
)

// clusterName is this package's local cluster, apart from the other e2e packages'.
const clusterName = "kdag-e2e-sharding"

// repoRoot is the repository, relative to this package.
const repoRoot = "../../.."

var (
	local  *cluster.Cluster
	scheme = runtime.NewScheme()
	cl     client.Client
	// operator is the reference operator's binary, built once by TestMain.
	operator string
	// kubeconfig is a file with the cluster's kubeconfig, for the operator processes.
	kubeconfig string
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	// 300 Valkeys run a pod each, in each test: kwok's fake nodes take 110 pods each, and a
	// test's pods may still be going when the next test's start.
	os.Exit(cluster.Main(cluster.Options{Name: clusterName, Nodes: 6, Log: os.Stderr}, func(c *cluster.Cluster) int {
		local = c
		return run(m)
	}))
}

func run(m *testing.M) int {
	var err error
	// The tests poll hundreds of owners while they create and delete others: client-go's
	// default rate limit (5 requests a second) would hold their writes back for seconds.
	cfg := rest.CopyConfig(local.Config)
	cfg.QPS, cfg.Burst = 100, 200
	if cl, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := refop.InstallCRDs(local); err != nil {
		fmt.Fprintln(os.Stderr, "install CRDs:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kdag-e2e-sharding-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := local.WriteKubeconfig(kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	operator = filepath.Join(dir, "kdag")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", operator, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build the operator: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
