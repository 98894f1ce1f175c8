// Command demo is `make demo`: it brings up the local cluster, installs the CRDs, starts the
// operator, applies the sample application, waits until it is Ready, prints its status, and keeps
// the operator running until Ctrl-C (or exits at once with -exit-when-ready, for scripts).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"

	"github.com/kdag-dev/kdag/pkg/localcluster"
)

type options struct {
	name, kubeconfig, crds, sample, waitFor, managerLog string
	version                                             string
	timeout                                             time.Duration
	exitWhenReady                                       bool
}

func main() {
	var o options
	// Its own flag set: no imported package can register a clashing name on it.
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	fs.StringVar(&o.name, "name", "kdag", "name of the local cluster")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "bin/kubeconfig-kdag", "where the cluster's kubeconfig is written")
	fs.StringVar(&o.crds, "crds", "config/crd/bases", "directory of CRDs to install")
	fs.StringVar(&o.sample, "sample", "config/samples/gitea.yaml", "the application to deploy")
	fs.StringVar(&o.waitFor, "wait-for", "condition=Ready", "kubectl wait --for condition of the sample")
	fs.StringVar(&o.managerLog, "manager-log", "bin/demo-manager.log", "file that receives the operator's log")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait for the sample to be Ready")
	fs.StringVar(&o.version, "version", "dev", "operator version stamped into the manager (main.version)")
	fs.BoolVar(&o.exitWhenReady, "exit-when-ready", false, "stop the operator and exit once the sample is Ready")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: -h exits 0, a bad flag 2

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("\033[1m==> "+format+"\033[0m\n", args...)
}

func run(ctx context.Context, o options) error {
	start := time.Now()
	step("starting the local cluster %s", o.name)
	c, err := localcluster.Start(ctx, localcluster.Options{Name: o.name, Log: os.Stdout})
	if err != nil {
		return err
	}
	if err := c.WriteKubeconfig(o.kubeconfig); err != nil {
		return err
	}

	if crds, _ := filepath.Glob(filepath.Join(o.crds, "*.yaml")); len(crds) > 0 {
		step("installing %d CRDs from %s", len(crds), o.crds)
		out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", o.crds)
		if err != nil {
			return err
		}
		fmt.Print(indent(out))
	}

	step("building and starting the operator (log: %s)", o.managerLog)
	manager, err := startManager(ctx, o)
	if err != nil {
		return err
	}
	defer manager.stop()
	if err := manager.waitReady(ctx, "http://127.0.0.1:8081/readyz"); err != nil {
		return errors.Wrapf(err, "operator not ready: see %s", o.managerLog)
	}
	step("operator ready")

	if _, err := os.Stat(o.sample); err != nil {
		step("no sample at %s yet: the operator runs with no application to reconcile", o.sample)
	} else {
		step("applying %s", o.sample)
		out, err := c.Kubectl(ctx, "apply", "--server-side", "-f", o.sample)
		if err != nil {
			return err
		}
		fmt.Print(indent(out))
		step("waiting for %s (timeout %s)", o.waitFor, o.timeout)
		if _, err := c.Kubectl(ctx, "wait", "--for", o.waitFor, "--timeout", o.timeout.String(), "-f", o.sample); err != nil {
			return errors.Wrapf(err, "sample not Ready: see %s and `kubectl --kubeconfig %s describe -f %s`",
				o.managerLog, o.kubeconfig, o.sample)
		}
		step("Ready in %s", time.Since(start).Round(100*time.Millisecond))
		if out, err := c.Kubectl(ctx, "get", "-f", o.sample, "-o", "wide"); err == nil {
			fmt.Print(indent(out))
		}
	}
	if o.exitWhenReady {
		return nil
	}
	step("operator running; try: KUBECONFIG=%s kubectl get all -A. Ctrl-C stops the operator (the cluster stays: make dev-cluster-delete)", o.kubeconfig)
	select {
	case <-ctx.Done():
	case <-manager.done:
		return errors.Errorf("operator exited: see %s", o.managerLog)
	}
	step("stopping the operator")
	return nil
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startManager builds the operator and runs it against the local cluster, its log in a file.
func startManager(ctx context.Context, o options) (*process, error) {
	build := exec.CommandContext(ctx, "go", "build", "-ldflags", "-X main.version="+o.version, "-o", "bin/manager", ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return nil, errors.Wrap(err, "build the operator")
	}
	logFile, err := os.Create(o.managerLog)
	if err != nil {
		return nil, errors.Wrapf(err, "create %s", o.managerLog)
	}
	// Not CommandContext: on Ctrl-C the manager gets SIGTERM and shuts down gracefully.
	cmd := exec.Command("bin/manager", "--metrics-bind-address=127.0.0.1:8080", "--health-probe-bind-address=127.0.0.1:8081")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us, not the manager.
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, errors.Wrap(err, "start the operator")
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls the manager's readiness probe until it answers 200, the manager exits or ctx ends.
func (p *process) waitReady(ctx context.Context, url string) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(url); err == nil { //nolint:noctx // loopback probe, bounded by the loop.
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-p.done:
			return errors.New("operator exited")
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and waits up to 30 s for a graceful shutdown, then kills.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func indent(b []byte) string {
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ") + "\n"
}
