// Package gitea runs the reference operator (controllers.Setup) against the local kwok cluster
// (pkg/testing/cluster): the sample Gitea becomes Ready, upgrades, loses its cache, survives an
// operator restart and is deleted, as a user would see it.
package gitea

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers"
	kdagv1alpha1 "github.com/kdag-dev/kdag/pkg/apis/kdag/v1alpha1"
	"github.com/kdag-dev/kdag/pkg/controller"
	"github.com/kdag-dev/kdag/pkg/controllertest"
	"github.com/kdag-dev/kdag/pkg/testing/cluster"
	"github.com/kdag-dev/kdag/pkg/testing/poll"
	"github.com/kdag-dev/kdag/pkg/testing/running"
	"github.com/kdag-dev/kdag/test/internal/refop"
)

// repoRoot is the repository, relative to this package.
const repoRoot = "../../.."

var (
	local  *cluster.Cluster
	scheme = runtime.NewScheme()
	cl     client.Client
)

func TestMain(m *testing.M) {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(giteav1alpha1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	// The managers log to a file per test (see startManager); controller-runtime's global
	// logger, for what runs outside a manager, is silenced.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	os.Exit(cluster.Main(cluster.Options{Name: "kdag-e2e-gitea", Log: os.Stderr}, func(c *cluster.Cluster) int {
		local = c
		return run(m)
	}))
}

func run(m *testing.M) int {
	var err error
	if cl, err = client.New(local.Config, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := refop.InstallCRDs(local); err != nil {
		fmt.Fprintln(os.Stderr, "install CRDs:", err)
		return 1
	}
	if err := waitGarbageCollector(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// waitGarbageCollector waits until kube-controller-manager's garbage collector handles the
// CRDs' kinds. It picks up new kinds on its periodic discovery sync (every 30 s), so on a fresh
// cluster the objects of a deleted Valkey would otherwise stay until then. The probe: an owner
// of each kind, no controller running, with a ConfigMap that names it as owner; once every
// owner is deleted and every ConfigMap collected, the collector knows the kinds.
func waitGarbageCollector(ctx context.Context) error {
	start := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-probe-"}}
	if err := cl.Create(ctx, ns); err != nil {
		return err
	}
	defer func() { _ = cl.Delete(context.Background(), ns) }()
	owners := []client.Object{
		&giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}},
		&giteav1alpha1.PostgreSQL{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}},
		&giteav1alpha1.Valkey{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}},
		&giteav1alpha1.GiteaServer{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"},
			Spec: giteav1alpha1.GiteaServerSpec{
				Version:  giteav1alpha1.DefaultGiteaVersion,
				Database: giteav1alpha1.ServerDatabaseSpec{SecretRef: giteav1alpha1.SecretReference{Name: "probe"}},
			},
		},
	}
	var dependents []client.Object
	for _, o := range owners {
		if err := cl.Create(ctx, o); err != nil {
			return fmt.Errorf("garbage collector probe: create %T: %w", o, err)
		}
		gvk, err := cl.GroupVersionKindFor(o)
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: ns.Name, Name: strings.ToLower(gvk.Kind),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind, Name: o.GetName(), UID: o.GetUID()}},
		}}
		if err := cl.Create(ctx, cm); err != nil {
			return fmt.Errorf("garbage collector probe: create ConfigMap: %w", err)
		}
		dependents = append(dependents, cm)
		if err := cl.Delete(ctx, o); err != nil {
			return fmt.Errorf("garbage collector probe: delete %T: %w", o, err)
		}
	}
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, d := range dependents {
			if err := cl.Get(ctx, client.ObjectKeyFromObject(d), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the garbage collector did not collect the dependents of deleted gitea.kdag.dev objects within 2m: %w", err)
	}
	fmt.Fprintf(os.Stderr, "==> garbage collector handles the gitea.kdag.dev kinds (waited %s)\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// startManager runs the reference operator as main does (controllers.Components, controller.Setup and CacheOptions),
// limited to namespace ns so that tests do not see each other's objects, with operatorVersion
// written into every owner's status. It returns a function that stops the manager and waits for
// it; the test's cleanup calls it too. The manager's log goes to a file, named in the test log
// when the test fails or E2E_KEEP_LOGS is set.
func startManager(t *testing.T, ns, operatorVersion string) (stop func()) {
	t.Helper()
	stop, _ = startManagerWithLog(t, ns, operatorVersion)
	return stop
}

// startManagerWithLog is startManager, and returns the path of the manager's log file too.
func startManagerWithLog(t *testing.T, ns, operatorVersion string) (stop func(), logPath string) {
	t.Helper()
	return startManagerWithConfig(t, local.Config, ns, operatorVersion)
}

// startManagerWithConfig is startManagerWithLog reaching the API server with cfg (through a
// latency proxy, say), with opts added to every component's.
func startManagerWithConfig(t testing.TB, cfg *rest.Config, ns, operatorVersion string, opts ...controller.Options) (stop func(), logPath string) {
	t.Helper()
	components := controllers.Components(nil, append([]controller.Options{{OperatorVersion: operatorVersion}}, opts...)...)
	m := controllertest.StartManager(t, cfg, scheme, components, controllertest.ManagerOptions{Namespace: ns})
	return func() { _ = m.Stop() }, m.Log.Path() // the test's cleanup reports Stop's error
}

// runManager starts a manager reaching the API server with cfg, with cacheOpts and the
// controllers setup registers, logging to a file named after the test and name. It returns a
// function that stops the manager and waits for it (the test's cleanup calls it too) and the
// log's path; the log is kept, and named in the test log, when the test fails or E2E_KEEP_LOGS
// is set.
func runManager(t testing.TB, cfg *rest.Config, cacheOpts cache.Options, name string, setup func(ctrl.Manager) error) (stop func(), logPath string) {
	t.Helper()
	logFile, err := os.CreateTemp("", "kdag-e2e-gitea-"+strings.ReplaceAll(t.Name(), "/", "-")+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Logger:     zap.New(zap.WriteTo(logFile), zap.UseDevMode(true)),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	stopManager := running.Manager(t, mgr)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopManager()
			logFile.Close()
			if t.Failed() || os.Getenv("E2E_KEEP_LOGS") != "" {
				t.Logf("operator log (%s): %s", name, logFile.Name())
			} else {
				os.Remove(logFile.Name())
			}
		})
	}
	t.Cleanup(stop)
	return stop, logFile.Name()
}

// applySample creates the objects of config/samples/<file> in ns and returns the Gitea's key.
func applySample(t testing.TB, ns, file string) client.ObjectKey {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	var key client.ObjectKey
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(ns)
		if err := cl.Create(t.Context(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == giteav1alpha1.GiteaKind {
			key = client.ObjectKeyFromObject(u)
		}
	}
	if key.Name == "" {
		t.Fatalf("%s has no Gitea", file)
	}
	return key
}

// readyFor returns "" when the owner is Ready for its current generation, or why not.
func readyFor(ctx context.Context, obj client.Object, status func() *kdagv1alpha1.Status) string {
	if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err.Error()
	}
	st := status()
	ready := meta.FindStatusCondition(st.Conditions, kdagv1alpha1.ConditionReady)
	switch {
	case st.ObservedGeneration != obj.GetGeneration():
		return fmt.Sprintf("observedGeneration %d, generation %d", st.ObservedGeneration, obj.GetGeneration())
	case ready == nil || ready.Status != metav1.ConditionTrue:
		return fmt.Sprintf("Ready condition %+v; graph %+v", ready, st.Graph)
	}
	return ""
}

// waitGiteaReady waits until the Gitea is Ready for its current generation and returns it.
func waitGiteaReady(t *testing.T, key client.ObjectKey, timeout time.Duration) *giteav1alpha1.Gitea {
	t.Helper()
	g := &giteav1alpha1.Gitea{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	poll.Until(t, "Gitea "+key.String()+" Ready", timeout, func(ctx context.Context) string {
		return readyFor(ctx, g, func() *kdagv1alpha1.Status { return &g.Status.Status })
	})
	return g
}

// get reads the object named name in ns into obj; it fails the test if that fails.
func get[T client.Object](t *testing.T, ns, name string, obj T) T {
	t.Helper()
	if err := cl.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatalf("get %T %s/%s: %v", obj, ns, name, err)
	}
	return obj
}

// mergePatch applies a JSON merge patch to obj.
func mergePatch(t *testing.T, obj client.Object, patch string) {
	t.Helper()
	if err := cl.Patch(t.Context(), obj, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
		t.Fatalf("patch %s with %s: %v", obj.GetName(), patch, err)
	}
}

// serverImage returns the image of the Gitea server container of the Deployment.
func serverImage(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "gitea" {
			return c.Image
		}
	}
	return ""
}
