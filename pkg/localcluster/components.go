package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The control-plane processes of a local cluster, by the names Outage and Components take (kwokctl's
// pid files under <WorkDir>/clusters/<Name>/pids are named after them).
const (
	ComponentEtcd                  = "etcd"
	ComponentKubeAPIServer         = "kube-apiserver"
	ComponentKubeControllerManager = "kube-controller-manager"
	ComponentKubeScheduler         = "kube-scheduler"
	ComponentKwokController        = "kwok-controller"
)

// Components returns the pid of each control-plane process of the cluster that kwokctl started, by
// component name (ComponentEtcd, ...); a component whose process has exited is absent. It returns
// an error when the cluster's pid directory cannot be read.
func (c *Cluster) Components() (map[string]int, error) {
	dir := c.pidDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, errors.Wrapf(err, "read the pid files of local cluster %s", c.Name)
	}
	out := map[string]int{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		if pid, err := readPid(filepath.Join(dir, e.Name())); err == nil && alive(pid) {
			out[name] = pid
		}
	}
	return out, nil
}

// Outage kills the named components of the cluster (ComponentKubeAPIServer, ComponentEtcd, ...)
// with SIGKILL, as a crash or the OOM killer would, keeps them down for down, then starts every
// component that is not running (those killed, and any that exited on its own meanwhile) and waits
// until the API server answers /readyz. It returns when the cluster serves again, with
// the time that took from the restart; the components' logs are under
// <WorkDir>/clusters/<Name>/logs.
//
// While the components are down no other local cluster is created or started (the machine-wide
// port lock Start takes is held), so that none takes the port of a killed component. It returns
// an error naming the component that was not running before the outage or could not be killed,
// or when the cluster does not serve again before ctx ends.
func (c *Cluster) Outage(ctx context.Context, down time.Duration, components ...string) (time.Duration, error) {
	unlock, err := lockFile("kdag-cluster-ports.lock")
	if err != nil {
		return 0, err
	}
	defer unlock()
	for _, name := range components {
		if err := c.kill(ctx, name); err != nil {
			return 0, err
		}
	}
	select {
	case <-ctx.Done():
		return 0, errors.Wrapf(context.Cause(ctx), "outage of %s in local cluster %s", strings.Join(components, ", "), c.Name)
	case <-time.After(down):
	}
	start := time.Now()
	err = c.restartStopped(ctx)
	return time.Since(start), err
}

// RestartStopped starts every component of the cluster whose process is not running (one that
// exited on its own) and waits until the API server answers /readyz. With every component
// running it only checks /readyz. It returns an error when kwokctl fails or the API server does
// not answer before ctx ends.
func (c *Cluster) RestartStopped(ctx context.Context) error {
	unlock, err := lockFile("kdag-cluster-ports.lock")
	if err != nil {
		return err
	}
	defer unlock()
	return c.restartStopped(ctx)
}

// kill sends SIGKILL to the component's process, waits until it has exited and removes its pid
// file (kwokctl starts a component only when its pid file names no live process).
func (c *Cluster) kill(ctx context.Context, name string) error {
	path := filepath.Join(c.pidDir(), name+".pid")
	pid, err := readPid(path)
	if err != nil {
		return errors.Wrapf(err, "component %s of local cluster %s", name, c.Name)
	}
	if !alive(pid) {
		return errors.Errorf("component %s of local cluster %s (pid %d) is not running", name, c.Name, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return errors.Wrapf(err, "kill component %s of local cluster %s (pid %d)", name, c.Name, pid)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return !alive(pid), nil
	})
	if err != nil {
		return errors.Wrapf(err, "component %s of local cluster %s (pid %d) still running after SIGKILL", name, c.Name, pid)
	}
	return errors.Wrapf(removeIfExists(path), "remove the pid file of component %s", name)
}

// restartStopped is RestartStopped without the lock. The pid file of a process that exited (an
// unreaped zombie answers signal 0, so kwokctl would take it for running) is removed first.
func (c *Cluster) restartStopped(ctx context.Context) error {
	dir := c.pidDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return errors.Wrapf(err, "read the pid files of local cluster %s", c.Name)
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if pid, err := readPid(path); err != nil || !alive(pid) {
			if err := removeIfExists(path); err != nil {
				return errors.Wrapf(err, "remove stale pid file %s", path)
			}
		}
	}
	if _, err := c.kwokctl(ctx, "start", "cluster", "--name", c.Name); err != nil {
		return errors.Wrapf(err, "start the stopped components of local cluster %s", c.Name)
	}
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return c.reachable(ctx), nil
	})
	return errors.Wrapf(err, "local cluster %s does not answer /readyz after its restart", c.Name)
}

// pidDir is where kwokctl's binary runtime keeps the cluster's pid files.
func (c *Cluster) pidDir() string {
	work := c.opts.WorkDir
	if work == "" {
		work = os.Getenv("KWOK_WORKDIR")
	}
	if work == "" {
		home, _ := os.UserHomeDir()
		work = filepath.Join(home, ".kwok")
	}
	return filepath.Join(work, "clusters", c.Name, "pids")
}

func readPid(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, errors.Wrap(err, "read pid file")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, errors.Errorf("pid file %s holds %q, not a process id", path, raw)
	}
	return pid, nil
}

// alive reports whether process pid runs: it exists and, where /proc tells, is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return !os.IsNotExist(err) || !procMounted()
	}
	// /proc/<pid>/stat: "pid (comm) state ...", comm may hold spaces and parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
