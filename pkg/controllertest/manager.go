package controllertest

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/pkg/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kdag-dev/kdag/pkg/controller"
)

// KeepLogsEnv names the environment variable that, when set, keeps every manager log file of a
// passing test too (a failing test's is always kept), its path written to the test log.
const KeepLogsEnv = "KDAG_KEEP_LOGS"

// LogTailLines is how many of its last lines a manager log shows in the log of a failing test.
const LogTailLines = 200

// ManagerLog is the log of the managers a test starts: a file that a failing test shows the last
// LogTailLines lines of, with its path, when the test ends; a passing test removes it (unless
// KeepLogsEnv is set). It is safe for concurrent use.
type ManagerLog struct {
	mu   sync.Mutex
	file *os.File
	path string
}

// NewManagerLog creates the log file of t's managers in the system's temporary directory and
// registers its report with t.Cleanup: the tail and the path when t failed, nothing (and the
// file removed) when it passed. It fails t when the file cannot be created.
func NewManagerLog(t testing.TB) *ManagerLog {
	t.Helper()
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	f, err := os.CreateTemp("", "kdag-manager-"+name+"-*.log")
	if err != nil {
		t.Fatalf("controllertest: manager log: %v", err)
	}
	l := &ManagerLog{file: f, path: f.Name()}
	t.Cleanup(func() { l.report(t) })
	return l
}

// Path is the log file's path.
func (l *ManagerLog) Path() string { return l.path }

// Logger returns a development-mode zap logger (controller-runtime's, all levels) writing to the
// file: pass it as ctrl.Options.Logger.
func (l *ManagerLog) Logger() logr.Logger {
	return zap.New(zap.WriteTo(l), zap.UseDevMode(true))
}

// Write appends p to the file; after the test's end it drops p.
func (l *ManagerLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return len(p), nil // a manager still stopping after the report
	}
	return l.file.Write(p)
}

// report closes the file and, when t failed or KeepLogsEnv is set, writes its path (and, when t
// failed, its last LogTailLines lines) to t's log; otherwise it removes the file.
func (l *ManagerLog) report(t testing.TB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.file.Close()
	l.file = nil
	switch {
	case t.Failed():
		t.Logf("manager log (%s), last %d lines:\n%s", l.path, LogTailLines, tail(l.path, LogTailLines))
	case os.Getenv(KeepLogsEnv) != "":
		t.Logf("manager log: %s", l.path)
	default:
		_ = os.Remove(l.path)
	}
}

// tail returns the last n lines of the file at path, or why it cannot be read.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// ManagerOptions configures StartManager. The zero value caches every namespace, serves no
// metrics and adds no Controller options.
type ManagerOptions struct {
	// Namespace, when set, limits the cache to that namespace (kdag's watches stay where
	// controller.CacheOptions puts them).
	Namespace string
	// MetricsAddr is the metrics server's bind address ("127.0.0.1:8080"); empty: none.
	MetricsAddr string
	// Wraps wrap the manager's transport in turn, the last outermost (a latency proxy, tracing,
	// a faults.Script).
	Wraps []func(http.RoundTripper) http.RoundTripper
	// ControllerOptions are added to every component's (controller.Setup).
	ControllerOptions []controller.Options
	// Log, when set, is the manager's log; nil: a new one (NewManagerLog).
	Log *ManagerLog
	// Logger, when set, is where the manager logs instead of Log's file: for a test that reads
	// the manager's log lines itself (the tracing test's trace correlation).
	Logger logr.Logger
}

// Manager is a manager StartManager started.
type Manager struct {
	// Manager is the controller-runtime manager.
	Manager ctrl.Manager
	// Log is where the manager logs; a failing test shows its tail.
	Log *ManagerLog

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	err    error
}

// StartManager starts a controller-runtime manager reaching the API server with cfg, scheme for
// its client and cache, the cache options of components (controller.CacheOptions) and the
// components set up on it (controller.Setup, with its start-up RBAC check), as the operator's
// main does; then it waits until its cache has synced. Controller names may repeat between the
// managers of a test process. The manager stops when the test ends, or at Stop; an error from
// its Start then fails t. StartManager fails t when the manager cannot be made or set up, or its
// cache does not sync.
func StartManager(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme, components []controller.Component, opts ManagerOptions) *Manager {
	t.Helper()
	if opts.Log == nil {
		opts.Log = NewManagerLog(t)
	}
	cacheOpts := controller.CacheOptions(scheme, components...)
	if opts.Namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	mgr, err := newManager(cfg, scheme, cacheOpts, opts)
	if err != nil {
		t.Fatalf("controllertest: %v", err)
	}
	if err := controller.Setup(t.Context(), mgr, components, opts.ControllerOptions...); err != nil {
		t.Fatalf("controllertest: set up components: %v", err)
	}
	m := runManager(mgr, opts.Log)
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("controllertest: manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatalf("controllertest: the manager's cache did not sync (manager: %v)", m.Stop())
	}
	return m
}

// newManager makes a manager as StartManager does, with cacheOpts, without components.
func newManager(cfg *rest.Config, scheme *runtime.Scheme, cacheOpts cache.Options, opts ManagerOptions) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	for _, w := range opts.Wraps {
		cfg.Wrap(w)
	}
	metricsAddr := opts.MetricsAddr
	if metricsAddr == "" {
		metricsAddr = "0"
	}
	logger := opts.Log.Logger()
	if opts.Logger.GetSink() != nil {
		logger = opts.Logger
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:         scheme,
		Logger:         logger,
		Metrics:        metricsserver.Options{BindAddress: metricsAddr},
		Cache:          cacheOpts,
		MapperProvider: controller.MapperProvider, // as CacheOptions asks of a cache limited to namespaces
		// Tests start many managers in one process; controller names repeat between them.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	return mgr, errors.Wrap(err, "new manager")
}

// runManager starts mgr in a goroutine.
func runManager(mgr ctrl.Manager, log *ManagerLog) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, Log: log, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.err = mgr.Start(ctx)
	}()
	return m
}

// Stop stops the manager, waits until its Start has returned and returns Start's error. It may
// be called more than once; later calls return the same error.
func (m *Manager) Stop() error {
	m.once.Do(func() {
		m.cancel()
		<-m.done
	})
	return m.err
}
