// Package controlplane runs the reference operator's binary as a process against a local kwok
// cluster of its own (pkg/testing/cluster) and breaks the control plane under it while a fleet of
// Giteas deploys or changes (docs/reliability.md, "Control-plane faults"):
//
//   - TestFault_APIServerKilledDuringFirstDeploy: kube-apiserver SIGKILLed, down 5 s, restarted;
//   - TestFault_EtcdKilledDuringFirstDeploy: etcd SIGKILLed, down 5 s, restarted;
//   - TestFault_NetworkCutDuringFirstDeploy: the operator cut off the API server for 30 s (its
//     kubeconfig points at a loopback TCP proxy the test owns, pkg/testing/latency, which resets
//     every connection and refuses new ones);
//   - TestFault_OperatorKilledDuringRecreate: the operator SIGKILLed while the databases' StatefulSets
//     are deleted (propagation Orphan) and not yet created again, a storage growth's Recreate;
//     a new operator process takes over.
//
// Each ends with every Gitea Ready for its generation, no PersistentVolumeClaim or generated
// Secret deleted or re-created (a watch records every version; UIDs and Secret bytes compared
// with a snapshot taken before the fault), and the operator's reconcile rate, scraped from its
// metrics endpoint (controller_runtime_reconcile_total), idle within a minute of convergence.
// Each logs its figures in one line starting "FAULT".
//
// KDAG_FAULT_GITEAS sets the fleet's size (default 20, what a 2-core CI machine runs in a few
// minutes; docs/reliability.md gives the figures for 100); KDAG_FAULT_CLUSTER names the local
// cluster (default kdag-e2e-controlplane).
package controlplane

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/leak"
	"github.com/kdag-dev/kdag/test/internal/refop"
)

const (
	// clusterName is this package's local cluster, apart from the other e2e packages': its
	// control plane is killed.
	clusterName = "kdag-e2e-controlplane"
	// repoRoot is the repository, relative to this package.
	repoRoot = "../../.."
	// expandableClass is a StorageClass of the hostPath provisioner that allows volume expansion.
	expandableClass = "kdag-e2e-expandable"
	// giteasEnv sets the fleet's size.
	giteasEnv = "KDAG_FAULT_GITEAS"
	// clusterEnv names another local cluster than clusterName (two runs at once).
	clusterEnv = "KDAG_FAULT_CLUSTER"
	// defaultGiteas is the fleet's size in CI.
	defaultGiteas = 20
)

var (
	local  *cluster.Cluster
	scheme = runtime.NewScheme()
	cl     client.Client
	// operator is the reference operator's binary, built once by TestMain.
	operator string
	// giteas is the fleet's size of every test.
	giteas = defaultGiteas
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if v := os.Getenv(giteasEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a positive number of Giteas\n", giteasEnv, v)
			os.Exit(2)
		}
		giteas = n
	}
	// A Gitea runs up to four pods (database, cache, server, migration Job); kwok's fake nodes
	// take 110 pods each.
	nodes := max(2, giteas*4/100+1)
	name := clusterName
	if v := os.Getenv(clusterEnv); v != "" {
		name = v
	}
	os.Exit(leak.Check(func() int {
		return cluster.Main(cluster.Options{Name: name, Nodes: nodes, Log: os.Stderr}, func(c *cluster.Cluster) int {
			local = c
			return run(m)
		})
	}))
}

func run(m *testing.M) int {
	// The test's own client creates and patches a fleet at once: no client-side throttling.
	cfg := rest.CopyConfig(local.Config)
	cfg.QPS, cfg.Burst = 100, 200
	var err error
	if cl, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// A cluster reused from an earlier run may have been left with a component down.
	if err := local.RestartStopped(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := refop.InstallCRDs(local); err != nil {
		fmt.Fprintln(os.Stderr, "install CRDs:", err)
		return 1
	}
	class := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: expandableClass},
		Provisioner:          "kubernetes.io/host-path",
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := cl.Create(context.Background(), class); err != nil && !apierrors.IsAlreadyExists(err) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kdag-e2e-controlplane-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	operator = filepath.Join(dir, "kdag")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", operator, ".")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build the operator: %v\n%s", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "==> %d Giteas per fault (%s)\n", giteas, giteasEnv)
	return m.Run()
}
