// Package localcluster starts a whole local Kubernetes cluster without containers: kwokctl's binary
// runtime runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler from the binaries
// that `make tools-cluster` builds from source, and kwok fakes the nodes and pods. Deployments roll
// out, Jobs complete, PersistentVolumeClaims bind (kube-controller-manager's hostPath provisioner
// behind a default StorageClass) and the garbage collector runs, so it serves the e2e tests, `make
// dev-cluster` and `make demo`. No image is pulled or run: pods become Running without a process.
//
// It is an ordinary package, linked into the `make demo` and `make dev-cluster` commands: it imports
// neither the testing package nor controller-runtime's envtest (whose imports register a global
// --kubeconfig flag). The test helpers on top of it (a namespace per test, TestMain) are in
// pkg/testing/cluster.
//
// A cluster is found by name: Start reuses one that is running, starts one that is stopped, and
// creates one otherwise; Stop deletes it only if Start created it.
package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// StorageClassName is the default StorageClass the cluster gets. Claims without a class bind to
// volumes that kube-controller-manager's hostPath provisioner creates under /tmp.
const StorageClassName = "standard"

// Options configure Start. Every field has a usable zero value.
type Options struct {
	// Name of the kwok cluster. Default: "kdag".
	Name string
	// Nodes is the number of fake nodes. Default: 2.
	Nodes int
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok
	// and kwokctl. Default: BinDir() ($KUBEBUILDER_ASSETS or bin/cluster).
	BinDir string
	// WorkDir is kwokctl's state directory. Default: kwokctl's own ($KWOK_WORKDIR or ~/.kwok).
	WorkDir string
	// Log receives one line per step. kwokctl's own output is kept for error messages only.
	// Default: discarded.
	Log io.Writer
	// Timeout bounds Start. Default: 3 minutes.
	Timeout time.Duration
}

// Cluster is a running local cluster.
type Cluster struct {
	// Name is the kwok cluster name.
	Name string
	// Kubeconfig is a kubeconfig file's content that reaches the cluster as an admin.
	Kubeconfig []byte
	// Config is Kubeconfig parsed, without a client-side rate limit (QPS -1, as ctrl.GetConfig
	// sets it).
	Config *rest.Config
	// Created is true when Start created the cluster rather than reusing or restarting one.
	Created bool

	opts Options
	// clientset is built from Config.
	clientset kubernetes.Interface
}

func (o *Options) defaults() error {
	if o.Name == "" {
		o.Name = "kdag"
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.BinDir == "" {
		dir, err := BinDir(binaries...)
		if err != nil {
			return err
		}
		o.BinDir = dir
	}
	return nil
}

var binaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok", "kwokctl"}

// Start returns the running cluster named opts.Name, starting or creating it first when needed,
// with opts.Nodes Ready fake nodes and a default StorageClass. Concurrent Starts of the same name
// (parallel test packages) are serialised with a file lock. It returns an error naming the step
// that failed and the end of kwokctl's output; the cluster's component logs are under
// `<WorkDir>/clusters/<Name>/logs`.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, opts.Timeout,
		errors.Errorf("local cluster %s not ready within %s", opts.Name, opts.Timeout))
	defer cancel()

	c := &Cluster{Name: opts.Name, opts: opts}
	unlock, err := lockFile("kdag-cluster-" + c.Name + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()

	// kwokctl picks a free port for each component when it creates a cluster and binds it only
	// when the component starts: two clusters created at once can pick the same port. Creating
	// and starting clusters one at a time, machine-wide, keeps their ports apart.
	unlockPorts, err := lockFile("kdag-cluster-ports.lock")
	if err != nil {
		return nil, err
	}
	err = c.ensureRunning(ctx)
	unlockPorts()
	if err != nil {
		return nil, err
	}
	if err := c.loadKubeconfig(ctx); err != nil {
		return nil, err
	}
	if err := c.prepare(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// ensureRunning creates, starts or reuses the cluster.
func (c *Cluster) ensureRunning(ctx context.Context) error {
	out, err := c.kwokctl(ctx, "get", "clusters")
	if err != nil {
		return errors.Wrap(err, "list kwok clusters")
	}
	exists := false
	for _, line := range strings.Fields(string(out)) {
		exists = exists || line == c.Name
	}
	if !exists {
		c.logf("creating local cluster %s (kwokctl, binary runtime, %d fake nodes)", c.Name, c.opts.Nodes)
		cfg, err := c.writeConfig()
		if err != nil {
			return err
		}
		if _, err := c.kwokctl(ctx, "create", "cluster", "--name", c.Name, "--runtime", "binary",
			"--config", cfg, "--kubeconfig", "", "--wait", "60s"); err != nil {
			return errors.Wrapf(err, "create local cluster %s", c.Name)
		}
		c.Created = true
		return nil
	}
	if c.reachable(ctx) {
		c.logf("reusing running local cluster %s", c.Name)
		return nil
	}
	c.logf("starting stopped local cluster %s", c.Name)
	if _, err := c.kwokctl(ctx, "start", "cluster", "--name", c.Name, "--wait", "60s"); err != nil {
		return errors.Wrapf(err, "start local cluster %s (delete it with `kwokctl delete cluster --name %s` if it is broken)", c.Name, c.Name)
	}
	return nil
}

// reachable reports whether the cluster's API server answers /readyz.
func (c *Cluster) reachable(ctx context.Context) bool {
	if err := c.loadKubeconfig(ctx); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

// writeConfig writes the kwokctl configuration: kube-controller-manager gets the hostPath
// provisioner, so claims bind without a storage plugin, and it and kube-scheduler run without
// leader election, so that they outlive an API server restart (Cluster.Outage).
func (c *Cluster) writeConfig() (string, error) {
	const config = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-controller-manager
  extraArgs:
  - key: enable-hostpath-provisioner
    value: "true"
  # One instance: no Lease to hold. With leader election it would exit once the API server is
  # away longer than its renew deadline (Cluster.Outage restarts it, but only once it has exited).
  - key: leader-elect
    value: "false"
- name: kube-scheduler
  extraArgs:
  - key: leader-elect
    value: "false"
- name: kube-apiserver
  extraArgs:
  # The default /24 holds 254 Services with a cluster IP; the sharding test runs 300.
  - key: service-cluster-ip-range
    value: 10.0.0.0/16
`
	dir, err := os.MkdirTemp("", "kdag-cluster-")
	if err != nil {
		return "", errors.Wrap(err, "create temporary directory for kwokctl configuration")
	}
	path := filepath.Join(dir, "kwokctl.yaml")
	return path, errors.Wrap(os.WriteFile(path, []byte(config), 0o600), "write kwokctl configuration")
}

func (c *Cluster) loadKubeconfig(ctx context.Context) error {
	kc, err := c.kwokctl(ctx, "get", "kubeconfig", "--name", c.Name)
	if err != nil {
		return errors.Wrapf(err, "get kubeconfig of local cluster %s", c.Name)
	}
	cfg, err := restConfig(kc)
	if err != nil {
		return errors.Wrapf(err, "parse kubeconfig of local cluster %s", c.Name)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return errors.Wrapf(err, "create clientset for local cluster %s", c.Name)
	}
	c.Kubeconfig, c.Config, c.clientset = kc, cfg, cs
	return nil
}

// restConfig parses the kubeconfig kc into a rest.Config without a client-side rate limit
// (QPS -1), as ctrl.GetConfig gives an operator (controller-runtime relies on the API server's
// Priority and Fairness). Left at 0, client-go would hold each client of the config to 5
// requests a second per kind after a burst of 10, which the operator does not have, and which
// made the tests' 10 ms polls 200 ms ones.
func restConfig(kc []byte) (*rest.Config, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	return cfg, nil
}

// prepare scales the fake nodes, waits for them to be Ready and installs the default StorageClass.
func (c *Cluster) prepare(ctx context.Context) error {
	if _, err := c.kwokctl(ctx, "scale", "node", "--name", c.Name, "--replicas", fmt.Sprint(c.opts.Nodes)); err != nil {
		return errors.Wrapf(err, "scale local cluster %s to %d nodes", c.Name, c.opts.Nodes)
	}
	cs := c.clientset
	c.logf("waiting for %d Ready nodes", c.opts.Nodes)
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server may still be starting: retry.
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= c.opts.Nodes, nil
	})
	if err != nil {
		return errors.Wrapf(context.Cause(ctx), "wait for %d Ready nodes in local cluster %s", c.opts.Nodes, c.Name)
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClassName,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner: "kubernetes.io/host-path",
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return errors.Wrapf(err, "create StorageClass %s", StorageClassName)
	}
	c.logf("local cluster %s ready: %s", c.Name, c.Config.Host)
	return nil
}

// InstallCRDs creates crds on the cluster, or updates those a reused cluster already has, then
// waits up to 30 s until each is Established and discovery serves every version it declares (what
// `kubectl apply` of a CRD followed by `kubectl wait --for condition=Established` does). It returns
// an error naming the CRD that could not be created or updated, or the one not served in time.
func (c *Cluster) InstallCRDs(ctx context.Context, crds ...*apiextensionsv1.CustomResourceDefinition) error {
	return installCRDs(ctx, c.Config, 30*time.Second, crds...)
}

// Clientset returns a client-go clientset for the cluster, built from Config.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Stop deletes the cluster if Start created it and leaves a reused one running.
func (c *Cluster) Stop(ctx context.Context) error {
	if c == nil || !c.Created {
		return nil
	}
	return c.Delete(ctx)
}

// Delete deletes the cluster and its state, whoever created it.
func (c *Cluster) Delete(ctx context.Context) error {
	c.logf("deleting local cluster %s", c.Name)
	_, err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name)
	return errors.Wrapf(err, "delete local cluster %s", c.Name)
}

// Delete deletes the cluster named opts.Name if it exists; deleting an absent cluster is not an
// error.
func Delete(ctx context.Context, opts Options) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	c := &Cluster{Name: opts.Name, opts: opts}
	return c.Delete(ctx)
}

// ComponentLog returns the log of one of the cluster's components as kwokctl keeps it:
// "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd" or "kwok-controller".
// The error names the component and carries the end of kwokctl's output.
func (c *Cluster) ComponentLog(ctx context.Context, component string) ([]byte, error) {
	return c.kwokctl(ctx, "logs", component, "--name", c.Name)
}

// WriteKubeconfig writes the cluster's kubeconfig to path (mode 0600) for kubectl and `make run`.
func (c *Cluster) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return errors.Wrapf(err, "create directory of %s", path)
	}
	return errors.Wrapf(os.WriteFile(path, c.Kubeconfig, 0o600), "write kubeconfig %s", path)
}

// Kubectl runs the cluster's kubectl with args against this cluster and returns its combined
// output; the error carries the output's end.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	f, err := os.CreateTemp("", "kdag-kubeconfig-")
	if err != nil {
		return nil, errors.Wrap(err, "create temporary kubeconfig")
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(c.Kubeconfig); err != nil {
		f.Close()
		return nil, errors.Wrap(err, "write temporary kubeconfig")
	}
	f.Close()
	return c.run(ctx, filepath.Join(c.opts.BinDir, "kubectl"), append([]string{"--kubeconfig", f.Name()}, args...)...)
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) ([]byte, error) {
	return c.run(ctx, filepath.Join(c.opts.BinDir, "kwokctl"), args...)
}

func (c *Cluster) run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), c.env()...)
	var out, diag bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &diag
	if err := cmd.Run(); err != nil {
		return out.Bytes(), errors.Wrapf(err, "%s %s: %s", filepath.Base(bin), strings.Join(args, " "),
			tail(out.String()+diag.String(), 2000))
	}
	return out.Bytes(), nil
}

// env points kwokctl at the local binaries, so it never downloads anything.
func (c *Cluster) env() []string {
	b := func(name string) string { return filepath.Join(c.opts.BinDir, name) }
	env := []string{
		"KWOK_RUNTIME=binary",
		"KWOK_KUBE_APISERVER_BINARY=" + b("kube-apiserver"),
		"KWOK_KUBE_CONTROLLER_MANAGER_BINARY=" + b("kube-controller-manager"),
		"KWOK_KUBE_SCHEDULER_BINARY=" + b("kube-scheduler"),
		"KWOK_KUBECTL_BINARY=" + b("kubectl"),
		"KWOK_ETCD_BINARY=" + b("etcd"),
		"KWOK_CONTROLLER_BINARY=" + b("kwok"),
	}
	if os.Getenv("KWOK_KUBE_VERSION") == "" {
		env = append(env, "KWOK_KUBE_VERSION="+kubeVersion(b("kube-apiserver")))
	}
	if c.opts.WorkDir != "" {
		env = append(env, "KWOK_WORKDIR="+c.opts.WorkDir)
	}
	return env
}

// kubeVersion asks the kube-apiserver binary for its version ("v1.37.1").
func kubeVersion(apiserver string) string {
	out, err := exec.Command(apiserver, "--version").Output()
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(out))
	return fields[len(fields)-1]
}

// lockFile takes an exclusive lock on the file name in the temporary directory, shared by every
// process on the machine (parallel test binaries), and returns its release. It blocks until the
// lock is free.
func lockFile(name string) (func(), error) {
	path := filepath.Join(os.TempDir(), name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, errors.Wrapf(err, "open lock file %s", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, errors.Wrapf(err, "lock %s", path)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.opts.Log, "==> "+format+"\n", args...)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
